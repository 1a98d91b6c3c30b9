// What the HDF5 files the harness writes share: an identifier that closes
// itself, text types and text attributes (result files, bench problem's files).
#pragma once
#include <hdf5.h>

#include <cstddef>
#include <string>

namespace attn {

// An HDF5 identifier closed when it goes out of scope; a negative (failed)
// one is held as invalid and not closed.
class Hdf5Handle {
 public:
  Hdf5Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Hdf5Handle() {
    if (id_ >= 0) close_(id_);
  }
  Hdf5Handle(Hdf5Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = -1; }
  Hdf5Handle(const Hdf5Handle&) = delete;
  Hdf5Handle& operator=(const Hdf5Handle&) = delete;
  Hdf5Handle& operator=(Hdf5Handle&&) = delete;
  operator hid_t() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// A text HDF5 type: bytes of a fixed width, or variable UTF-8 (width 0).
Hdf5Handle text_type(std::size_t width);

// Writes the scalar text attribute `name` of `object`, replacing one of that
// name; throws std::runtime_error naming it when it cannot.
void write_string_attribute(hid_t object, const std::string& name, const std::string& value);

}  // namespace attn
