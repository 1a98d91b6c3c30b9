#include "results_file.hpp"

#include <hdf5.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>

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
  copy_string(x.variant, r.variant);
  x.batch = r.batch; x.heads = r.heads; x.seq = r.seq; x.dk = r.dk; x.dv = r.dv; x.chunk = r.chunk; x.slots = r.slots;
  x.reps = r.reps;
  x.time_median_s = r.time_median_s; x.time_min_s = r.time_min_s; x.time_max_s = r.time_max_s;
  x.time_mean_s = r.time_mean_s; x.peak_bytes = r.peak_bytes; x.flops = r.flops; x.bytes = r.bytes;
  x.gflops = r.gflops; x.gbps = r.gbps; x.err_heads = r.err_heads;
  x.max_abs_err = r.max_abs_err; x.rel_l2_err = r.rel_l2_err;
  return x;
}

ResultRow from_record(const Record& x) {
  ResultRow r;
  r.form = x.form; r.family = x.family; r.backend = x.backend; r.precision = x.precision;
  r.status = x.status; r.note = x.note; r.variant = x.variant;
  r.batch = x.batch; r.heads = x.heads; r.seq = x.seq; r.dk = x.dk; r.dv = x.dv; r.chunk = x.chunk; r.slots = x.slots;
  r.reps = x.reps;
  r.time_median_s = x.time_median_s; r.time_min_s = x.time_min_s; r.time_max_s = x.time_max_s;
  r.time_mean_s = x.time_mean_s; r.peak_bytes = x.peak_bytes; r.flops = x.flops; r.bytes = x.bytes;
  r.gflops = x.gflops; r.gbps = x.gbps; r.err_heads = x.err_heads;
  r.max_abs_err = x.max_abs_err; r.rel_l2_err = x.rel_l2_err;
  return r;
}

void quiet_hdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  const char* text = value.c_str();
  H5Awrite(attr, type, &text);
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
}

}  // namespace

ResultFile::ResultFile(const std::string& path, const std::map<std::string, std::string>& attributes) {
  quiet_hdf5();
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) throw std::runtime_error("cannot create folder '" + parent.string() + "': " + ec.message());
  file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file_ < 0) throw std::runtime_error("cannot create output file '" + path + "'");
  for (const auto& [name, value] : attributes) write_string_attribute(file_, name, value);
  type_ = record_type();
  hsize_t dims[1] = {0}, max_dims[1] = {H5S_UNLIMITED}, chunk[1] = {64};
  hid_t space = H5Screate_simple(1, dims, max_dims);
  hid_t props = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(props, 1, chunk);
  dataset_ = H5Dcreate2(file_, "points", type_, space, H5P_DEFAULT, props, H5P_DEFAULT);
  H5Pclose(props);
  H5Sclose(space);
  if (dataset_ < 0) throw std::runtime_error("cannot create the points table in '" + path + "'");
  H5Fflush(file_, H5F_SCOPE_GLOBAL);
}

ResultFile::~ResultFile() {
  if (dataset_ >= 0) H5Dclose(dataset_);
  if (type_ >= 0) H5Tclose(type_);
  if (file_ >= 0) H5Fclose(file_);
}

void ResultFile::append(const ResultRow& row) {
  const Record record = to_record(row);
  hsize_t size[1] = {rows_ + 1}, start[1] = {rows_}, count[1] = {1};
  bool ok = H5Dset_extent(dataset_, size) >= 0;
  hid_t file_space = H5Dget_space(dataset_);
  hid_t mem_space = H5Screate_simple(1, count, nullptr);
  ok = ok && H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, nullptr, count, nullptr) >= 0;
  ok = ok && H5Dwrite(dataset_, type_, mem_space, file_space, H5P_DEFAULT, &record) >= 0;
  H5Sclose(mem_space);
  H5Sclose(file_space);
  ok = ok && H5Fflush(file_, H5F_SCOPE_GLOBAL) >= 0;
  if (!ok) throw std::runtime_error("cannot append a row to the result file");
  ++rows_;
}

std::vector<ResultRow> ResultFile::read(const std::string& path) {
  quiet_hdf5();
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) throw std::runtime_error("cannot open result file '" + path + "'");
  hid_t dataset = H5Dopen2(file, "points", H5P_DEFAULT);
  if (dataset < 0) {
    H5Fclose(file);
    throw std::runtime_error("'" + path + "' has no points table");
  }
  hid_t space = H5Dget_space(dataset);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space, &n, nullptr);
  std::vector<Record> records(n);
  hid_t type = record_type();
  const bool ok = n == 0 || H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, records.data()) >= 0;
  H5Tclose(type);
  H5Sclose(space);
  H5Dclose(dataset);
  H5Fclose(file);
  if (!ok) throw std::runtime_error("cannot read the points table of '" + path + "'");
  std::vector<ResultRow> rows;
  for (const auto& r : records) rows.push_back(from_record(r));
  return rows;
}

std::map<std::string, std::string> ResultFile::read_attributes(const std::string& path) {
  quiet_hdf5();
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) throw std::runtime_error("cannot open result file '" + path + "'");
  std::map<std::string, std::string> out;
  hid_t root = H5Gopen2(file, "/", H5P_DEFAULT);
  H5O_info_t info;
  H5Oget_info(root, &info);
  for (hsize_t i = 0; i < info.num_attrs; ++i) {
    hid_t attr = H5Aopen_by_idx(root, ".", H5_INDEX_NAME, H5_ITER_NATIVE, i, H5P_DEFAULT, H5P_DEFAULT);
    char name[256] = {};
    H5Aget_name(attr, sizeof(name), name);
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    H5Tset_cset(type, H5T_CSET_UTF8);
    char* text = nullptr;
    if (H5Aread(attr, type, &text) >= 0 && text) {
      out[name] = text;
      H5free_memory(text);
    }
    H5Tclose(type);
    H5Aclose(attr);
  }
  H5Gclose(root);
  H5Fclose(file);
  return out;
}

}  // namespace attn
