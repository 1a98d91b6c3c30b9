#include "hdf5_handle.hpp"

#include <stdexcept>

namespace attn {

Hdf5Handle text_type(std::size_t width) {
  Hdf5Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  if (width == 0) {
    H5Tset_size(type, H5T_VARIABLE);
    H5Tset_cset(type, H5T_CSET_UTF8);
  } else {
    H5Tset_size(type, width);
    H5Tset_strpad(type, H5T_STR_NULLTERM);
  }
  return type;
}

void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  if (H5Aexists(object, name.c_str()) > 0) H5Adelete(object, name.c_str());
  const Hdf5Handle type = text_type(0);
  const Hdf5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  const Hdf5Handle attr(H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT),
                        H5Aclose);
  const char* text = value.c_str();
  if (!attr.valid() || H5Awrite(attr, type, &text) < 0)
    throw std::runtime_error("cannot write the attribute '" + name + "'");
}

}  // namespace attn
