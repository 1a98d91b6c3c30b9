#include "results_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fcntl.h>
#include <hdf5.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <tuple>

#include "registry.hpp"
#include "text.hpp"

namespace attn {
namespace {

// The on-disk record: fixed-length strings, so that h5py, h5dump and pandas
// read it as a plain table.
struct Record {
  char form[48], family[16], backend[16], precision[8], status[16], note[160], variant[64];
  int batch, heads, seq, dk, dv, chunk, slots, reps;
  double time_median_s, time_min_s, time_max_s, time_mean_s;
  std::uint64_t peak_bytes;
  double flops, bytes, gflops, gbps;
  int err_heads;
  double max_abs_err, rel_l2_err;
  char revision[48];  // added in v4, after the older columns, which keep their places
  double time_stddev_s;  // these two added in v5
  int iterations;
};

hid_t string_type(std::size_t n) {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, n);
  H5Tset_strpad(t, H5T_STR_NULLTERM);
  return t;
}

hid_t record_type() {
  hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(Record));
  auto add_string = [&](const char* name, std::size_t offset, std::size_t n) {
    hid_t s = string_type(n);
    H5Tinsert(t, name, offset, s);
    H5Tclose(s);
  };
#define ATTN_STRING(f) add_string(#f, HOFFSET(Record, f), sizeof(Record::f))
#define ATTN_FIELD(f, h5) H5Tinsert(t, #f, HOFFSET(Record, f), h5)
  ATTN_STRING(form); ATTN_STRING(family); ATTN_STRING(backend); ATTN_STRING(precision);
  ATTN_STRING(status); ATTN_STRING(note); ATTN_STRING(variant);
  ATTN_FIELD(batch, H5T_NATIVE_INT); ATTN_FIELD(heads, H5T_NATIVE_INT); ATTN_FIELD(seq, H5T_NATIVE_INT);
  ATTN_FIELD(dk, H5T_NATIVE_INT); ATTN_FIELD(dv, H5T_NATIVE_INT); ATTN_FIELD(chunk, H5T_NATIVE_INT);
  ATTN_FIELD(slots, H5T_NATIVE_INT);
  ATTN_FIELD(reps, H5T_NATIVE_INT);
  ATTN_FIELD(time_median_s, H5T_NATIVE_DOUBLE); ATTN_FIELD(time_min_s, H5T_NATIVE_DOUBLE);
  ATTN_FIELD(time_max_s, H5T_NATIVE_DOUBLE); ATTN_FIELD(time_mean_s, H5T_NATIVE_DOUBLE);
  ATTN_FIELD(peak_bytes, H5T_NATIVE_UINT64);
  ATTN_FIELD(flops, H5T_NATIVE_DOUBLE); ATTN_FIELD(bytes, H5T_NATIVE_DOUBLE);
  ATTN_FIELD(gflops, H5T_NATIVE_DOUBLE); ATTN_FIELD(gbps, H5T_NATIVE_DOUBLE);
  ATTN_FIELD(err_heads, H5T_NATIVE_INT);
  ATTN_FIELD(max_abs_err, H5T_NATIVE_DOUBLE); ATTN_FIELD(rel_l2_err, H5T_NATIVE_DOUBLE);
  ATTN_STRING(revision);
  ATTN_FIELD(time_stddev_s, H5T_NATIVE_DOUBLE); ATTN_FIELD(iterations, H5T_NATIVE_INT);
#undef ATTN_STRING
#undef ATTN_FIELD
  return t;
}

template <std::size_t N>
void copy_string(char (&dst)[N], const std::string& src) {
  std::memset(dst, 0, N);
  std::memcpy(dst, src.data(), std::min(src.size(), N - 1));
}

Record to_record(const ResultRow& r) {
  Record x{};
  copy_string(x.form, r.form); copy_string(x.family, r.family); copy_string(x.backend, r.backend);
  copy_string(x.precision, r.precision); copy_string(x.status, r.status); copy_string(x.note, r.note);
  copy_string(x.variant, r.variant); copy_string(x.revision, r.revision);
  x.batch = r.batch; x.heads = r.heads; x.seq = r.seq; x.dk = r.dk; x.dv = r.dv; x.chunk = r.chunk; x.slots = r.slots;
  x.reps = r.reps;
  x.time_median_s = r.time_median_s; x.time_min_s = r.time_min_s; x.time_max_s = r.time_max_s;
  x.time_mean_s = r.time_mean_s; x.peak_bytes = r.peak_bytes; x.flops = r.flops; x.bytes = r.bytes;
  x.gflops = r.gflops; x.gbps = r.gbps; x.err_heads = r.err_heads;
  x.max_abs_err = r.max_abs_err; x.rel_l2_err = r.rel_l2_err;
  x.time_stddev_s = r.time_stddev_s; x.iterations = r.iterations;
  return x;
}

ResultRow from_record(const Record& x) {
  ResultRow r;
  r.form = x.form; r.family = x.family; r.backend = x.backend; r.precision = x.precision;
  r.status = x.status; r.note = x.note; r.variant = x.variant; r.revision = x.revision;
  r.batch = x.batch; r.heads = x.heads; r.seq = x.seq; r.dk = x.dk; r.dv = x.dv; r.chunk = x.chunk; r.slots = x.slots;
  r.reps = x.reps;
  r.time_median_s = x.time_median_s; r.time_min_s = x.time_min_s; r.time_max_s = x.time_max_s;
  r.time_mean_s = x.time_mean_s; r.peak_bytes = x.peak_bytes; r.flops = x.flops; r.bytes = x.bytes;
  r.gflops = x.gflops; r.gbps = x.gbps; r.err_heads = x.err_heads;
  r.max_abs_err = x.max_abs_err; r.rel_l2_err = x.rel_l2_err;
  r.time_stddev_s = x.time_stddev_s; r.iterations = x.iterations;
  return r;
}

void quiet_hdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

// An HDF5 identifier closed when it goes out of scope.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = -1; }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle& operator=(Handle&&) = delete;
  operator hid_t() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

Handle variable_string_type() {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  return type;
}

void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  if (H5Aexists(object, name.c_str()) > 0) H5Adelete(object, name.c_str());
  const Handle type = variable_string_type();
  const Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  const Handle attr(H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  const char* text = value.c_str();
  if (!attr.valid() || H5Awrite(attr, type, &text) < 0)
    throw std::runtime_error("cannot write the attribute '" + name + "'");
}

std::map<std::string, std::string> read_string_attributes(hid_t file) {
  std::map<std::string, std::string> out;
  const Handle root(H5Gopen2(file, "/", H5P_DEFAULT), H5Gclose);
  H5O_info_t info;
  if (H5Oget_info(root, &info) < 0) return out;
  for (hsize_t i = 0; i < info.num_attrs; ++i) {
    const Handle attr(H5Aopen_by_idx(root, ".", H5_INDEX_NAME, H5_ITER_NATIVE, i, H5P_DEFAULT, H5P_DEFAULT),
                      H5Aclose);
    char name[256] = {};
    H5Aget_name(attr, sizeof(name), name);
    const Handle type = variable_string_type();
    char* text = nullptr;
    if (H5Aread(attr, type, &text) >= 0 && text) {
      out[name] = text;
      H5free_memory(text);
    }
  }
  return out;
}

// The rows of an open /points table. HDF5 converts compound types member by
// member, by name: reading a v2 table (no `slots`) or a v3 table (no
// `revision`) through the current record type leaves the missing column as it
// was in the zero-initialised records: 0, or an empty string.
// Why a row read back is not one bench wrote (damaged, or junk written over
// it); empty when it is well formed. Strings must be printable text (UTF-8
// without control characters; the note, cut at its 160 bytes, maybe in the
// middle of a character, only without control bytes); status,
// precision and form known values (the form one of this build's, in its
// family); sizes positive; times, costs and rates finite and not negative (the
// errors may be NaN or infinite, as a diverging reference gives them, but not
// negative); the timed runs and checked heads within their ranges.
std::string damage_of(const ResultRow& r) {
  for (unsigned char c : r.note)
    if (c < 0x20 || c == 0x7f) return "the note holds control bytes";
  for (const std::string* text : {&r.form, &r.family, &r.backend, &r.precision, &r.status, &r.variant, &r.revision})
    if (!is_printable(*text)) return "a text column holds control bytes or bytes of no UTF-8 character";
  if (r.status != "ok" && r.status != "oom" && r.status != "timeout" && r.status != "error")
    return "status '" + r.status + "' is none of ok, oom, timeout, error";
  const auto precisions = precision_names();
  if (std::find(precisions.begin(), precisions.end(), r.precision) == precisions.end())
    return fmt::format("precision '{}' is none of {}", r.precision, fmt::join(precisions, ", "));
  const Form* form = find_form(r.form);
  if (!form) return "form '" + r.form + "' is not a form of this build (see bench list)";
  if (r.family != form->family) return "family '" + r.family + "' is not the family of " + r.form;
  if (r.batch < 1 || r.heads < 1 || r.seq < 1 || r.dk < 1 || r.dv < 1 || r.chunk < 0 || r.slots < 0)
    return "a size is not positive";
  for (const double x : {r.time_median_s, r.time_min_s, r.time_max_s, r.time_mean_s, r.time_stddev_s, r.flops, r.bytes,
                         r.gflops, r.gbps})
    if (!(x >= 0 && std::isfinite(x))) return fmt::format("a time, cost or rate is {}", x);
  for (const double x : r.samples)
    if (!(x >= 0 && std::isfinite(x))) return fmt::format("a sample is {}", x);
  if (r.max_abs_err < 0 || r.rel_l2_err < 0) return "an error is negative";
  if (r.reps < 0 || r.iterations < 0 || r.err_heads < 0 || r.err_heads > std::int64_t(r.batch) * r.heads)
    return "a count of timed runs or checked heads is out of range";
  return {};
}

// The samples of each row: one variable-length sequence of doubles per row of
// /points, at the same index.
Handle samples_type() { return Handle(H5Tvlen_create(H5T_NATIVE_DOUBLE), H5Tclose); }

// Reads /samples (absent before v5: every row's samples stay empty). A row's
// samples are written before the row: samples beyond the last row are those
// of a row whose write was cut off (a killed sweep), and are left out.
void read_samples(hid_t file, std::vector<ResultRow>& rows, const std::string& path) {
  if (H5Lexists(file, "samples", H5P_DEFAULT) <= 0) return;
  const Handle dataset(H5Dopen2(file, "samples", H5P_DEFAULT), H5Dclose);
  const Handle space(H5Dget_space(dataset), H5Sclose);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space, &n, nullptr);
  if (n < rows.size())
    throw IncompatibleResultFile(fmt::format("'{}' holds samples of {} rows for {} rows", path, n, rows.size()));
  if (n == 0) return;
  std::vector<hvl_t> sequences(n);
  const Handle type = samples_type();
  if (H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, sequences.data()) < 0)
    throw std::runtime_error("cannot read the samples of '" + path + "'");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto* values = static_cast<const double*>(sequences[i].p);
    rows[i].samples.assign(values, values + sequences[i].len);
  }
  H5Dvlen_reclaim(type, space, H5P_DEFAULT, sequences.data());
}

std::vector<ResultRow> read_points(hid_t file, hid_t dataset, const std::string& path) {
  // Every column of the record, but those added after v2 (`slots` in v3,
  // `revision` in v4, `time_stddev_s` and `iterations` in v5: 0 or empty in
  // older files), must be in the file's table: a missing one would read back
  // as zeros.
  const std::set<std::string> added_after_v2{"slots", "revision", "time_stddev_s", "iterations"};
  const Handle file_type(H5Dget_type(dataset), H5Tclose);
  const Handle wanted(record_type(), H5Tclose);
  for (int i = 0; i < H5Tget_nmembers(wanted); ++i) {
    char* name = H5Tget_member_name(wanted, unsigned(i));
    const std::string column = name;
    H5free_memory(name);
    if (!added_after_v2.count(column) && H5Tget_member_index(file_type, column.c_str()) < 0)
      throw IncompatibleResultFile("the points table of '" + path + "' has no column '" + column +
                                   "': not a bench result table");
  }
  const Handle space(H5Dget_space(dataset), H5Sclose);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space, &n, nullptr);
  std::vector<Record> records(n);  // value-initialised: zeros
  const Handle type(record_type(), H5Tclose);
  if (n > 0 && H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, records.data()) < 0)
    throw std::runtime_error("cannot read the points table of '" + path + "'");
  std::vector<ResultRow> rows;
  rows.reserve(n);
  for (const auto& r : records) rows.push_back(from_record(r));
  read_samples(file, rows, path);
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (const std::string damage = damage_of(rows[i]); !damage.empty())
      throw IncompatibleResultFile(fmt::format("row {} of '{}' is damaged ({})", i, path, damage));
  return rows;
}

}  // namespace

bool PointKey::operator<(const PointKey& o) const {
  return std::tie(form, variant, backend, precision, batch, heads, seq, dk, dv, chunk, slots) <
         std::tie(o.form, o.variant, o.backend, o.precision, o.batch, o.heads, o.seq, o.dk, o.dv, o.chunk, o.slots);
}

bool PointKey::operator==(const PointKey& o) const { return !(*this < o) && !(o < *this); }

std::string PointKey::describe() const {
  std::string text = form + " " + precision + " " + backend + " B=" + std::to_string(batch) +
                     " H=" + std::to_string(heads) + " L=" + std::to_string(seq) + " dk=" + std::to_string(dk) +
                     " dv=" + std::to_string(dv);
  if (chunk) text += " chunk=" + std::to_string(chunk);
  if (slots) text += " slots=" + std::to_string(slots);
  if (!variant.empty()) text += " [" + variant + "]";
  return text;
}

PointKey key_of(const ResultRow& r) {
  return PointKey{r.form, r.variant, r.backend, r.precision, r.batch, r.heads, r.seq, r.dk, r.dv, r.chunk, r.slots};
}

ResultFile::ResultFile(const std::string& path, const std::map<std::string, std::string>& attributes, Mode mode) {
  quiet_hdf5();
  type_ = record_type();
  samples_type_ = H5Tvlen_create(H5T_NATIVE_DOUBLE);
  std::error_code ec;
  try {
    if (mode == Mode::resume && std::filesystem::exists(path, ec))
      open_for_append(path);
    else
      create(path, attributes);
  } catch (...) {
    close();  // no destructor runs after a constructor throws
    throw;
  }
}

namespace {

// H5Fcreate(..., H5F_ACC_TRUNC) empties an existing file before it finds the
// lock that HDF5 (1.10: flock, held while a writer has the file open) keeps on
// it, so a --fresh run would destroy the rows of a sweep still writing there.
// The same lock is taken here first, on the file as it is, and held until the
// file is closed (HDF5's own, which would conflict with it, is then off for
// this file): no other writer can open the file between the check and the
// truncation, nor while this one writes. Returns the descriptor holding the
// lock, or -1 where it cannot be taken for another reason (no file can be
// created there: H5Fcreate says why; no flock on this file system: HDF5's
// locking is left as it is).
int lock_for_writing(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return -1;
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
  const bool busy = errno == EWOULDBLOCK;
  ::close(fd);
  if (busy)
    throw std::runtime_error("'" + path + "' is open in another process (a sweep still writing it?): not overwritten");
  return -1;
}

}  // namespace

void ResultFile::create(const std::string& path, const std::map<std::string, std::string>& attributes) {
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) throw std::runtime_error("cannot create folder '" + parent.string() + "': " + ec.message());
  lock_fd_ = lock_for_writing(path);
  const Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (lock_fd_ >= 0) H5Pset_file_locking(access, /*use_file_locking=*/false, /*ignore_when_disabled=*/true);
  file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access);
  if (file_ < 0) throw std::runtime_error("cannot create output file '" + path + "'");
  attributes_ = attributes;
  attributes_["format"] = result_format;
  for (const auto& [name, value] : attributes_) write_string_attribute(file_, name, value);
  hsize_t dims[1] = {0}, max_dims[1] = {H5S_UNLIMITED}, chunk[1] = {64};
  const Handle space(H5Screate_simple(1, dims, max_dims), H5Sclose);
  const Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_chunk(props, 1, chunk);
  dataset_ = H5Dcreate2(file_, "points", type_, space, H5P_DEFAULT, props, H5P_DEFAULT);
  if (dataset_ < 0) throw std::runtime_error("cannot create the points table in '" + path + "'");
  samples_ = H5Dcreate2(file_, "samples", samples_type_, space, H5P_DEFAULT, props, H5P_DEFAULT);
  if (samples_ < 0) throw std::runtime_error("cannot create the samples dataset in '" + path + "'");
  H5Fflush(file_, H5F_SCOPE_GLOBAL);
}

// Appends only to a table this build would have written itself: the format
// attribute is result_format and the table's columns are exactly the record's.
void ResultFile::open_for_append(const std::string& path) {
  if (H5Fis_hdf5(path.c_str()) <= 0) throw IncompatibleResultFile("'" + path + "' exists and is not an HDF5 file");
  file_ = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file_ < 0)
    throw std::runtime_error("cannot open '" + path +
                             "' for appending (read-only, damaged, or open in another process)");
  attributes_ = read_string_attributes(file_);
  const auto format = attributes_.find("format");
  if (format == attributes_.end())
    throw IncompatibleResultFile("'" + path + "' is not a bench result file (it has no format attribute)");
  if (format->second != result_format)
    throw IncompatibleResultFile("'" + path + "' is an older result file (" + format->second +
                                 "); rows are appended only to " + result_format + " files");
  dataset_ = H5Dopen2(file_, "points", H5P_DEFAULT);
  if (dataset_ < 0) throw IncompatibleResultFile("'" + path + "' has no points table");
  const Handle file_type(H5Dget_type(dataset_), H5Tclose);
  if (H5Tequal(file_type, type_) <= 0)
    throw IncompatibleResultFile("the points table of '" + path + "' has other columns than " + result_format);
  samples_ = H5Dopen2(file_, "samples", H5P_DEFAULT);
  if (samples_ < 0) throw IncompatibleResultFile("'" + path + "' has no samples dataset");
  rows_ = read_points(file_, dataset_, path);
  resumed_ = true;
}

ResultFile::~ResultFile() { close(); }

void ResultFile::close() {
  if (dataset_ >= 0) H5Dclose(dataset_);
  if (samples_ >= 0) H5Dclose(samples_);
  if (type_ >= 0) H5Tclose(type_);
  if (samples_type_ >= 0) H5Tclose(samples_type_);
  if (file_ >= 0) H5Fclose(file_);
  if (lock_fd_ >= 0) ::close(lock_fd_);  // after the file: releases the lock
  dataset_ = type_ = file_ = samples_ = samples_type_ = -1;
  lock_fd_ = -1;
}

namespace {
// Writes element `index` of a one-dimensional dataset, growing it to hold it.
bool write_element(hid_t dataset, hid_t type, hsize_t rows, hsize_t index, const void* value) {
  hsize_t size[1] = {std::max<hsize_t>(rows, index + 1)}, start[1] = {index}, count[1] = {1};
  if (H5Dset_extent(dataset, size) < 0) return false;
  const Handle file_space(H5Dget_space(dataset), H5Sclose);
  const Handle mem_space(H5Screate_simple(1, count, nullptr), H5Sclose);
  return H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, nullptr, count, nullptr) >= 0 &&
         H5Dwrite(dataset, type, mem_space, file_space, H5P_DEFAULT, value) >= 0;
}
}  // namespace

void ResultFile::write_row(unsigned long long index, const ResultRow& row) {
  const Record record = to_record(row);
  const hvl_t samples{row.samples.size(), const_cast<double*>(row.samples.data())};
  // The samples first: a row is in the table only once its samples are.
  bool ok = write_element(samples_, samples_type_, rows_.size(), index, &samples) &&
            write_element(dataset_, type_, rows_.size(), index, &record);
  ok = ok && H5Fflush(file_, H5F_SCOPE_GLOBAL) >= 0;
  if (!ok) throw std::runtime_error("cannot write a row to the result file");
}

void ResultFile::append(const ResultRow& row) {
  write_row(rows_.size(), row);
  rows_.push_back(row);
}

void ResultFile::replace(std::size_t index, const ResultRow& row) {
  if (index >= rows_.size()) throw std::out_of_range("ResultFile::replace: no row " + std::to_string(index));
  write_row(index, row);
  rows_[index] = row;
}

void ResultFile::set_attribute(const std::string& name, const std::string& value) {
  write_string_attribute(file_, name, value);
  H5Fflush(file_, H5F_SCOPE_GLOBAL);
  attributes_[name] = value;
}

namespace {
Handle open_result_file(const std::string& path) {
  quiet_hdf5();
  if (!std::filesystem::exists(path)) throw std::runtime_error("no such file: '" + path + "'");
  if (H5Fis_hdf5(path.c_str()) <= 0) throw std::runtime_error("'" + path + "' is not an HDF5 file");
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) throw std::runtime_error("cannot open result file '" + path + "'");
  return file;
}
}  // namespace

std::vector<ResultRow> ResultFile::read(const std::string& path) {
  const Handle file = open_result_file(path);
  const Handle dataset(H5Dopen2(file, "points", H5P_DEFAULT), H5Dclose);
  if (!dataset.valid()) throw std::runtime_error("'" + path + "' has no points table");
  return read_points(file, dataset, path);
}

std::map<std::string, std::string> ResultFile::read_attributes(const std::string& path) {
  return read_string_attributes(open_result_file(path));
}

}  // namespace attn
