#include "results_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fcntl.h>
#include <hdf5.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include "axes.hpp"
#include "hdf5_handle.hpp"
#include "registry.hpp"
#include "text.hpp"

namespace attn {
namespace {

using Handle = Hdf5Handle;

// The fixed columns of /points: TEXT(name, width of the fixed-length strings
// before v5) and NUMBER(name, C type, HDF5 type), the identity columns, then
// the axis columns (one int per swept axis, from v6; batch to slots before),
// then the measurement columns. Before v6 columns were only ever added at the
// end, so that older columns kept their places: `revision` in v4,
// `time_stddev_s` and `iterations` in v5 (`slots`, in v3, came before), and
// after v6 still at the end of the measurement columns: `err_rows` in v7,
// `kernel` and `kernel_reason` in v8; HDF5
// converts a table member by member, by name, so a column read is found
// wherever it is.
// clang-format off
#define ATTN_IDENTITY_COLUMNS(TEXT, NUMBER)                                                       \
  TEXT(form, 48) TEXT(family, 16) TEXT(backend, 16) TEXT(precision, 8) TEXT(status, 16)          \
  TEXT(note, 160) TEXT(variant, 64)
#define ATTN_MEASUREMENT_COLUMNS(TEXT, NUMBER)                                                    \
  NUMBER(reps, int, H5T_NATIVE_INT)                                                              \
  NUMBER(time_median_s, double, H5T_NATIVE_DOUBLE) NUMBER(time_min_s, double, H5T_NATIVE_DOUBLE) \
  NUMBER(time_max_s, double, H5T_NATIVE_DOUBLE) NUMBER(time_mean_s, double, H5T_NATIVE_DOUBLE)   \
  NUMBER(peak_bytes, std::uint64_t, H5T_NATIVE_UINT64) NUMBER(flops, double, H5T_NATIVE_DOUBLE)  \
  NUMBER(bytes, double, H5T_NATIVE_DOUBLE) NUMBER(gflops, double, H5T_NATIVE_DOUBLE)             \
  NUMBER(gbps, double, H5T_NATIVE_DOUBLE) NUMBER(err_heads, int, H5T_NATIVE_INT)                 \
  NUMBER(max_abs_err, double, H5T_NATIVE_DOUBLE) NUMBER(rel_l2_err, double, H5T_NATIVE_DOUBLE)   \
  TEXT(revision, 48) NUMBER(time_stddev_s, double, H5T_NATIVE_DOUBLE)                            \
  NUMBER(iterations, int, H5T_NATIVE_INT) NUMBER(err_rows, int, H5T_NATIVE_INT)              \
  TEXT(kernel, 48) TEXT(kernel_reason, 160)
#define ATTN_COLUMNS(TEXT, NUMBER) \
  ATTN_IDENTITY_COLUMNS(TEXT, NUMBER) ATTN_MEASUREMENT_COLUMNS(TEXT, NUMBER)
// clang-format on

#define ATTN_NUMBER_MEMBER(name, type, h5) type name;
// The fixed columns of the on-disk record from v5: variable-length UTF-8
// strings (h5py reads them as bytes objects, h5dump as strings), no text cut
// short.
#define ATTN_VARIABLE_TEXT_MEMBER(name, width) char* name;
struct Identity {
  ATTN_IDENTITY_COLUMNS(ATTN_VARIABLE_TEXT_MEMBER, ATTN_NUMBER_MEMBER)
};
struct Measurement {
  ATTN_MEASUREMENT_COLUMNS(ATTN_VARIABLE_TEXT_MEMBER, ATTN_NUMBER_MEMBER)
};
// Before v5: fixed-length strings (read only).
#define ATTN_FIXED_TEXT_MEMBER(name, width) char name[width];
struct FixedIdentity {
  ATTN_IDENTITY_COLUMNS(ATTN_FIXED_TEXT_MEMBER, ATTN_NUMBER_MEMBER)
};
struct FixedMeasurement {
  ATTN_MEASUREMENT_COLUMNS(ATTN_FIXED_TEXT_MEMBER, ATTN_NUMBER_MEMBER)
};
#undef ATTN_NUMBER_MEMBER
#undef ATTN_VARIABLE_TEXT_MEMBER
#undef ATTN_FIXED_TEXT_MEMBER

// A row in memory, as HDF5 reads and writes it: its identity columns, an int
// per axis, then its measurement columns (HDF5 orders a table's columns by
// their place in the record, so the file's columns are in this order too).
template <class I, class M>
struct Layout {
  using Identity = I;
  using Measurement = M;
  static constexpr std::size_t axes_at = sizeof(I);
  static std::size_t measurement_at(std::size_t axes) {
    return (axes_at + axes * sizeof(int) + alignof(M) - 1) / alignof(M) * alignof(M);
  }
  static std::size_t bytes(std::size_t axes) {
    constexpr std::size_t align = std::max(alignof(I), alignof(M));
    return (measurement_at(axes) + sizeof(M) + align - 1) / align * align;
  }
};
using Record = Layout<Identity, Measurement>;
using FixedRecord = Layout<FixedIdentity, FixedMeasurement>;

// The names of the fixed columns: every other integer column of a table is an axis.
const std::set<std::string>& fixed_columns() {
#define ATTN_TEXT_NAME(name, width) #name,
#define ATTN_NUMBER_NAME(name, type, h5) #name,
  static const std::set<std::string> names{ATTN_COLUMNS(ATTN_TEXT_NAME, ATTN_NUMBER_NAME)};
#undef ATTN_TEXT_NAME
#undef ATTN_NUMBER_NAME
  return names;
}

// Whether member `name` of struct S is a fixed-length string (a char array).
#define ATTN_IS_FIXED(S, name) std::is_array_v<decltype(S::name)>

// The compound type of a table of record layout R and these axes.
template <class R>
hid_t record_type(const std::vector<std::string>& axes) {
  hid_t t = H5Tcreate(H5T_COMPOUND, R::bytes(axes.size()));
  // Members of struct S, placed at `base`.
#define ATTN_TEXT_COLUMN(name, width)          \
  H5Tinsert(t, #name, base + HOFFSET(S, name), \
            text_type(ATTN_IS_FIXED(S, name) ? sizeof(S::name) : 0));
#define ATTN_NUMBER_COLUMN(name, type, h5) H5Tinsert(t, #name, base + HOFFSET(S, name), h5);
  {
    using S = typename R::Identity;
    const std::size_t base = 0;
    ATTN_IDENTITY_COLUMNS(ATTN_TEXT_COLUMN, ATTN_NUMBER_COLUMN)
  }
  for (std::size_t i = 0; i < axes.size(); ++i)
    H5Tinsert(t, axes[i].c_str(), R::axes_at + i * sizeof(int), H5T_NATIVE_INT);
  {
    using S = typename R::Measurement;
    const std::size_t base = R::measurement_at(axes.size());
    ATTN_MEASUREMENT_COLUMNS(ATTN_TEXT_COLUMN, ATTN_NUMBER_COLUMN)
  }
#undef ATTN_TEXT_COLUMN
#undef ATTN_NUMBER_COLUMN
  return t;
}

// The bytes of a row to write (its strings point into the row): the row's
// value of each axis, 0 for one it has not.
std::vector<unsigned char> to_record(const ResultRow& r, const std::vector<std::string>& axes) {
  Identity identity{};
  Measurement measurement{};
#define ATTN_TEXT_COLUMN(name, width) x.name = const_cast<char*>(r.name.c_str());
#define ATTN_NUMBER_COLUMN(name, type, h5) x.name = r.name;
  {
    Identity& x = identity;
    ATTN_IDENTITY_COLUMNS(ATTN_TEXT_COLUMN, ATTN_NUMBER_COLUMN)
  }
  {
    Measurement& x = measurement;
    ATTN_MEASUREMENT_COLUMNS(ATTN_TEXT_COLUMN, ATTN_NUMBER_COLUMN)
  }
#undef ATTN_TEXT_COLUMN
#undef ATTN_NUMBER_COLUMN
  std::vector<unsigned char> bytes(Record::bytes(axes.size()));
  std::memcpy(bytes.data(), &identity, sizeof(identity));
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const int value = r.axis(axes[i]);
    std::memcpy(bytes.data() + Record::axes_at + i * sizeof(int), &value, sizeof(int));
  }
  std::memcpy(bytes.data() + Record::measurement_at(axes.size()), &measurement,
              sizeof(measurement));
  return bytes;
}

// A text member read back: up to its first NUL within `width` bytes (a
// fixed-length string may fill its width); empty when absent (null).
std::string text_of(const char* text, std::size_t width) {
  return text ? std::string(text, strnlen(text, width)) : "";
}

// A row read back from the bytes of a record of layout R and these axes.
template <class R>
ResultRow from_record(const unsigned char* bytes, const std::vector<std::string>& axes) {
  typename R::Identity identity;
  typename R::Measurement measurement;
  std::memcpy(&identity, bytes, sizeof(identity));
  std::memcpy(&measurement, bytes + R::measurement_at(axes.size()), sizeof(measurement));
  ResultRow r;
#define ATTN_TEXT_COLUMN(name, width) \
  r.name = text_of(x.name, std::is_array_v<decltype(x.name)> ? sizeof(x.name) : SIZE_MAX);
#define ATTN_NUMBER_COLUMN(name, type, h5) r.name = x.name;
  {
    const auto& x = identity;
    ATTN_IDENTITY_COLUMNS(ATTN_TEXT_COLUMN, ATTN_NUMBER_COLUMN)
  }
  for (std::size_t i = 0; i < axes.size(); ++i) {
    int value = 0;
    std::memcpy(&value, bytes + R::axes_at + i * sizeof(int), sizeof(int));
    r.axes.emplace_back(axes[i], value);
  }
  {
    const auto& x = measurement;
    ATTN_MEASUREMENT_COLUMNS(ATTN_TEXT_COLUMN, ATTN_NUMBER_COLUMN)
  }
#undef ATTN_TEXT_COLUMN
#undef ATTN_NUMBER_COLUMN
  return r;
}
#undef ATTN_IS_FIXED

void quiet_hdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

}  // namespace

bool is_hdf5_file(const std::string& path) {
  quiet_hdf5();
  return std::filesystem::is_regular_file(path) && H5Fis_hdf5(path.c_str()) > 0;
}

void refuse_text_over_hdf5(const std::string& path, const std::string& option) {
  if (is_hdf5_file(path))
    throw std::invalid_argument(option + " '" + path + "' is an HDF5 file; not replaced by text");
}

namespace {

// A file a sweep was creating when it was killed before HDF5 wrote more than
// its first block: empty, or an HDF5 superblock too short to be a whole file,
// which does not open. It holds no row, so resuming it starts it as new (any
// file that opens is judged as a result file, and refused if it is not one).
bool holds_nothing(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return false;
  if (size == 0) return true;
  if (size >= 512 || !is_hdf5_file(path)) return false;
  const Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  return !file.valid();
}

std::map<std::string, std::string> read_string_attributes(hid_t file) {
  std::map<std::string, std::string> out;
  const Handle root(H5Gopen2(file, "/", H5P_DEFAULT), H5Gclose);
  H5O_info_t info;
  if (H5Oget_info(root, &info) < 0) return out;
  for (hsize_t i = 0; i < info.num_attrs; ++i) {
    const Handle attr(
        H5Aopen_by_idx(root, ".", H5_INDEX_NAME, H5_ITER_NATIVE, i, H5P_DEFAULT, H5P_DEFAULT),
        H5Aclose);
    char name[256] = {};
    H5Aget_name(attr, sizeof(name), name);
    const Handle type = text_type(0);
    char* text = nullptr;
    if (H5Aread(attr, type, &text) >= 0 && text) {
      out[name] = text;
      H5free_memory(text);
    }
  }
  return out;
}

// Why a row read back is not one bench wrote (damaged, or junk written over
// it); empty when it is well formed. Strings must be printable text (UTF-8
// without control characters; the note, in files before v5 cut at its 160
// bytes, maybe in the middle of a character, only without control bytes);
// status, precision and form known values (the form one of this build's, in its
// family); axes not negative, and positive for the sizes every form has
// (batch, heads, ...: an axis of no form parameter); times, costs and rates finite and not negative
// (the errors may be NaN or infinite, as a diverging reference gives them, but not negative); the
// timed runs and checked heads within their ranges. `whole_notes`: a file of v5
// or later, whose notes are stored whole.
std::string damage_of(const ResultRow& r, bool whole_notes) {
  if (whole_notes ? !is_printable(r.note)
                  : std::any_of(r.note.begin(), r.note.end(),
                                [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
    return "the note holds control bytes or bytes of no UTF-8 character";
  for (const std::string* text : {&r.form, &r.family, &r.backend, &r.precision, &r.status,
                                  &r.variant, &r.revision, &r.kernel, &r.kernel_reason})
    if (!is_printable(*text))
      return "a text column holds control bytes or bytes of no UTF-8 character";
  if (r.status != "ok" && r.status != "oom" && r.status != "timeout" && r.status != "error")
    return "status '" + r.status + "' is none of ok, oom, timeout, error";
  if (!is_precision_name(r.precision))
    return fmt::format("precision '{}' is none of {}", r.precision,
                       fmt::join(precision_names(), ", "));
  const Form* form = find_form(r.form);
  if (!form) return "form '" + r.form + "' is not a form of this build (see bench list)";
  if (r.family != form->family) return "family '" + r.family + "' is not the family of " + r.form;
  for (const auto& [name, value] : r.axes) {
    const auto& axes = swept_axes();
    const auto axis =
        std::find_if(axes.begin(), axes.end(), [&](const SweptAxis& a) { return a.name == name; });
    if (value < (axis != axes.end() && !axis->param ? 1 : 0))
      return fmt::format("{} is {}, below its least value", name, value);
  }
  for (const double x : {r.time_median_s, r.time_min_s, r.time_max_s, r.time_mean_s,
                         r.time_stddev_s, r.flops, r.bytes, r.gflops, r.gbps})
    if (!(x >= 0 && std::isfinite(x))) return fmt::format("a time, cost or rate is {}", x);
  for (const double x : r.samples)
    if (!(x >= 0 && std::isfinite(x))) return fmt::format("a sample is {}", x);
  if (r.max_abs_err < 0 || r.rel_l2_err < 0) return "an error is negative";
  if (r.reps < 0 || r.iterations < 0 || r.err_heads < 0 ||
      r.err_heads > std::int64_t(r.axis("batch")) * r.axis("heads") || r.err_rows < 0 ||
      r.err_rows > r.axis("seq"))
    return "a count of timed runs or checked heads or rows is out of range";
  return {};
}

// The samples of each row: one variable-length sequence of doubles per row of
// /points, at the same index.
Handle samples_type() { return Handle(H5Tvlen_create(H5T_NATIVE_DOUBLE), H5Tclose); }

// The length of a one-dimensional table (/points, /samples); a table of
// another rank (a hand-made file) is refused before its extent is read into
// one number.
hsize_t table_length(hid_t space, const char* table, const std::string& path) {
  if (H5Sget_simple_extent_ndims(space) != 1)
    throw IncompatibleResultFile(
        fmt::format("the {} table of '{}' is not one-dimensional", table, path));
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space, &n, nullptr);
  return n;
}

// Reads /samples (absent before v5: every row's samples stay empty). A row's
// samples are written before the row: samples beyond the last row are those
// of a row whose write was cut off (a killed sweep), and are left out.
void read_samples(hid_t file, std::vector<ResultRow>& rows, const std::string& path) {
  if (H5Lexists(file, "samples", H5P_DEFAULT) <= 0) return;
  const Handle dataset(H5Dopen2(file, "samples", H5P_DEFAULT), H5Dclose);
  const Handle space(H5Dget_space(dataset), H5Sclose);
  const hsize_t n = table_length(space, "samples", path);
  if (n < rows.size())
    throw IncompatibleResultFile(
        fmt::format("'{}' holds samples of {} rows for {} rows", path, n, rows.size()));
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

// The rows of /points read as records R with these axes: a column absent
// from the file keeps its zero (0, or an empty string), as HDF5 converts
// compound types member by member, by name (a v2 table has no `slots`, a v3
// table no `revision`).
template <class R>
std::vector<ResultRow> read_records(hid_t dataset, const std::vector<std::string>& axes,
                                    const std::string& path) {
  const Handle space(H5Dget_space(dataset), H5Sclose);
  const hsize_t n = table_length(space, "points", path);
  const std::size_t stride = R::bytes(axes.size());
  std::vector<unsigned char> records(n * stride);  // zeros: 0, null strings
  const Handle type(record_type<R>(axes), H5Tclose);
  // A whole number beyond what this build's column holds (a hand-made int64
  // seq of 2^40) stops the read: HDF5 would otherwise clamp it to the
  // column's largest value, and the row would read back as another point.
  bool out_of_range = false;
  const Handle transfer(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
  H5Pset_type_conv_cb(
      transfer,
      [](H5T_conv_except_t except, hid_t, hid_t, void*, void*, void* flag) {
        if (except != H5T_CONV_EXCEPT_RANGE_HI && except != H5T_CONV_EXCEPT_RANGE_LOW)
          return H5T_CONV_UNHANDLED;
        *static_cast<bool*>(flag) = true;
        return H5T_CONV_ABORT;
      },
      &out_of_range);
  if (n > 0 && H5Dread(dataset, type, H5S_ALL, H5S_ALL, transfer, records.data()) < 0)
    throw IncompatibleResultFile(
        out_of_range
            ? fmt::format("the points table of '{}' holds a number beyond its column's range", path)
            : "cannot read the points table of '" + path + "'");
  std::vector<ResultRow> rows;
  rows.reserve(n);
  for (hsize_t i = 0; i < n; ++i) rows.push_back(from_record<R>(&records[i * stride], axes));
  if (n > 0)
    H5Dvlen_reclaim(type, space, H5P_DEFAULT, records.data());  // the variable-length strings
  return rows;
}

// The names of a table's columns, in order.
std::vector<std::string> column_names(hid_t type) {
  std::vector<std::string> names;
  for (int i = 0; i < H5Tget_nmembers(type); ++i) {
    char* name = H5Tget_member_name(type, unsigned(i));
    names.push_back(name);
    H5free_memory(name);
  }
  return names;
}

std::vector<ResultRow> read_points(hid_t file, hid_t dataset, const std::string& path) {
  // Every fixed column but those added after v2 (`revision` in v4,
  // `time_stddev_s` and `iterations` in v5, `err_rows` in v7, `kernel` and `kernel_reason` in
  // v8: empty or 0 in older files) must be in the file's table: a missing one would read back as
  // zeros.
  const std::set<std::string> added_after_v2{"revision", "time_stddev_s", "iterations",
                                             "err_rows", "kernel",        "kernel_reason"};
  const Handle file_type(H5Dget_type(dataset), H5Tclose);
  const Handle fixed(record_type<Record>({}), H5Tclose);
  for (const std::string& column : column_names(fixed))
    if (!added_after_v2.count(column) && H5Tget_member_index(file_type, column.c_str()) < 0)
      throw IncompatibleResultFile("the points table of '" + path + "' has no column '" + column +
                                   "': not a bench result table");
  // The file's axes: its other columns, integers, in its order (before v6 the
  // shape columns batch to slots, the axes of those names). Another kind of
  // column (a hand-edited `seq` of floats) would be no axis, and rows that
  // differ in it would be taken for one point: refused.
  std::vector<std::string> axes;
  for (const std::string& column : column_names(file_type)) {
    if (fixed_columns().count(column)) continue;
    const int index = H5Tget_member_index(file_type, column.c_str());
    if (H5Tget_member_class(file_type, unsigned(index)) != H5T_INTEGER)
      throw IncompatibleResultFile("the points table of '" + path + "' has a column '" + column +
                                   "' of no whole numbers: not an axis, not a bench column");
    axes.push_back(column);
  }
  // Strings are variable-length from v5, fixed-length before (HDF5 converts
  // neither into the other): the file's `form` column says which.
  const Handle form_type(
      H5Tget_member_type(file_type, unsigned(H5Tget_member_index(file_type, "form"))), H5Tclose);
  const bool whole_notes = H5Tis_variable_str(form_type) > 0;
  std::vector<ResultRow> rows = whole_notes ? read_records<Record>(dataset, axes, path)
                                            : read_records<FixedRecord>(dataset, axes, path);
  read_samples(file, rows, path);
  if (H5Tget_member_index(file_type, "kernel") < 0)
    for (ResultRow& row : rows) row.kernel = "unknown";  // measured before rows said
  std::map<PointKey, std::size_t> row_of;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (const std::string damage = damage_of(rows[i], whole_notes); !damage.empty())
      throw IncompatibleResultFile(fmt::format("row {} of '{}' is damaged ({})", i, path, damage));
    // A point measured twice would be one row to resume and compare, the other
    // silently dropped: a file holds each point once (bench writes it so).
    if (const auto [at, added] = row_of.emplace(key_of(rows[i]), i); !added)
      throw IncompatibleResultFile(fmt::format("rows {} and {} of '{}' are the same point ({})",
                                               at->second, i, path, at->first.describe()));
  }
  return rows;
}

}  // namespace

int ResultRow::axis(const std::string& name) const {
  for (const auto& [axis, value] : axes)
    if (axis == name) return value;
  return 0;
}

void ResultRow::set_axis(const std::string& name, int value) {
  for (auto& [axis, old] : axes)
    if (axis == name) {
      old = value;
      return;
    }
  axes.emplace_back(name, value);
}

bool PointKey::operator<(const PointKey& o) const {
  return std::tie(form, variant, backend, precision, axes) <
         std::tie(o.form, o.variant, o.backend, o.precision, o.axes);
}

bool PointKey::operator==(const PointKey& o) const { return !(*this < o) && !(o < *this); }

PointKey PointKey::without(const std::string& name) const {
  PointKey key = *this;
  key.axes.erase(std::remove_if(key.axes.begin(), key.axes.end(),
                                [&](const auto& axis) { return axis.first == name; }),
                 key.axes.end());
  return key;
}

std::string PointKey::describe() const {
  std::string text = form + " " + precision + " " + backend;
  for (const auto& [name, value] : axes)
    if (value) text += " " + name + "=" + std::to_string(value);
  if (!variant.empty()) text += " [" + variant + "]";
  return text;
}

PointKey key_of(const ResultRow& r) {
  const std::vector<std::string> declared = axis_columns();
  PointKey key{r.form, r.variant, r.backend, r.precision, {}};
  for (const auto& name : declared)
    if (const int value = r.axis(name)) key.axes.emplace_back(name, value);
  for (const auto& [name, value] : r.axes)
    if (value && std::find(declared.begin(), declared.end(), name) == declared.end())
      key.axes.emplace_back(name, value);
  return key;
}

PointKey key_on(const ResultRow& r, const std::vector<std::string>& axes) {
  PointKey key{r.form, r.variant, r.backend, r.precision, {}};
  for (const auto& name : axes) key.axes.emplace_back(name, r.axis(name));
  return key;
}

std::vector<std::string> axes_of(const std::vector<ResultRow>& rows) {
  std::vector<std::string> names;
  if (!rows.empty())
    for (const auto& axis : rows.front().axes) names.push_back(axis.first);
  return names;
}

ResultFile::ResultFile(const std::string& path,
                       const std::map<std::string, std::string>& attributes, Mode mode) {
  quiet_hdf5();
  path_ = path;
  type_ = record_type<Record>(axis_columns());
  samples_type_ = H5Tvlen_create(H5T_NATIVE_DOUBLE);
  std::error_code ec;
  // A FIFO, a device or a directory would block or be clobbered: refused.
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw std::runtime_error("'" + path + "' exists and is not a regular file");
  try {
    if (mode == Mode::resume && std::filesystem::exists(path, ec) && !holds_nothing(path))
      open_for_append(path);
    else
      create(path, attributes);
    reserve_fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  } catch (...) {
    close();  // no destructor runs after a constructor throws
    throw;
  }
}

namespace {

// The space reserved before each write beyond its data (see write_reserved).
constexpr off_t headroom = 256 << 10;

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
    throw std::runtime_error(
        "'" + path + "' is open in another process (a sweep still writing it?): not overwritten");
  return -1;
}

}  // namespace

void ResultFile::create(const std::string& path,
                        const std::map<std::string, std::string>& attributes) {
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec)
    throw std::runtime_error("cannot create folder '" + parent.string() + "': " + ec.message());
  lock_fd_ = lock_for_writing(path);
  // A new file's space is checked first too (see write_reserved): a creation
  // cut short by a full disk would leave a file that no later run can open.
  // An existing file (--fresh) is then left as it was.
  struct stat before {};
  if (lock_fd_ >= 0 && ::fstat(lock_fd_, &before) == 0) {
    const int err = ::posix_fallocate(lock_fd_, 0, headroom);
    if (err != 0 && err != EINVAL && err != EOPNOTSUPP) {
      if (before.st_size == 0)
        ::unlink(path.c_str());  // created by lock_for_writing
      else
        (void)!::ftruncate(lock_fd_, before.st_size);
      throw std::runtime_error(
          fmt::format("cannot create output file '{}': {} (disk full, or a file size limit "
                      "reached)",
                      path, std::strerror(err)));
    }
  }
  const Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (lock_fd_ >= 0)
    H5Pset_file_locking(access, /*use_file_locking=*/false, /*ignore_when_disabled=*/true);
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

namespace {
// N of "attn-harness points vN"; 0 for any other text.
int points_format_version(const std::string& format) {
  const std::string prefix = "attn-harness points v";
  return format.rfind(prefix, 0) == 0 ? std::atoi(format.c_str() + prefix.size()) : 0;
}
}  // namespace

// Appends only to a table this build would have written itself: the format
// attribute is result_format and the table's columns are exactly the record's.
void ResultFile::open_for_append(const std::string& path) {
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw IncompatibleResultFile("'" + path + "' exists and is not an HDF5 file");
  file_ = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file_ < 0)
    throw std::runtime_error("cannot open '" + path +
                             "' for appending (read-only, damaged, or open in another process)");
  attributes_ = read_string_attributes(file_);
  const auto format = attributes_.find("format");
  if (format == attributes_.end())
    throw IncompatibleResultFile("'" + path +
                                 "' is not a bench result file (it has no format attribute)");
  if (format->second != result_format)
    throw IncompatibleResultFile(
        "'" + path + "' is " +
        (points_format_version(format->second) < points_format_version(result_format)
             ? "an older result file ("
             : "a result file of another format (") +
        format->second + "); rows are appended only to " + result_format + " files");
  dataset_ = H5Dopen2(file_, "points", H5P_DEFAULT);
  if (dataset_ < 0) throw IncompatibleResultFile("'" + path + "' has no points table");
  const Handle file_type(H5Dget_type(dataset_), H5Tclose);
  if (H5Tequal(file_type, type_) <= 0)
    throw IncompatibleResultFile("the points table of '" + path + "' has other columns than " +
                                 result_format);
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
  if (reserve_fd_ >= 0) ::close(reserve_fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);  // after the file: releases the lock
  dataset_ = type_ = file_ = samples_ = samples_type_ = -1;
  lock_fd_ = reserve_fd_ = -1;
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

// A full disk (or a file size limit) must not cut a write in half: HDF5 then
// leaves a file whose flush failed part written (rows unreadable, or the whole
// file: its end recorded past the end of what is on disk), cannot close it, and
// crashes at exit. So the space a write may need is taken first, by growing
// the file past HDF5's end (posix_fallocate: EFBIG at a size limit, ENOSPC on a
// full disk). If that fails, nothing of the write has reached the file: it is
// as the last flush left it, every row before in it, and the sweep ends with
// one line saying why. What the write did not use is given back after the
// flush. `payload`: the bytes of the write's data; HDF5 adds far less than
// `headroom` of its own (a new chunk, heap collection or index node).
template <class Write>
void ResultFile::write_reserved(std::size_t payload, const Write& write) {
  hsize_t end = 0;
  if (reserve_fd_ >= 0 && H5Fget_filesize(file_, &end) >= 0) {
    const int err = ::posix_fallocate(reserve_fd_, off_t(end), headroom + 2 * off_t(payload));
    if (err != 0 && err != EINVAL &&
        err != EOPNOTSUPP)  // those two: no reserving here, write as before
      throw std::runtime_error(
          fmt::format("cannot write to the result file '{}': {} (disk full, or a file size "
                      "limit reached); every row before is in it",
                      path_, std::strerror(err)));
  }
  const bool ok = write() && H5Fflush(file_, H5F_SCOPE_GLOBAL) >= 0;
  const int err = errno;
  if (!ok)
    throw std::runtime_error(
        fmt::format("cannot write to the result file '{}' ({})", path_, std::strerror(err)));
  // HDF5 does not know of the reserved bytes past its end: they are cut off
  // (where that fails, zeros past HDF5's end stay, which HDF5 ignores).
  if (reserve_fd_ >= 0 && H5Fget_filesize(file_, &end) >= 0)
    (void)!::ftruncate(reserve_fd_, off_t(end));
}

void ResultFile::write_row(unsigned long long index, const ResultRow& row) {
  const std::vector<unsigned char> record = to_record(row, axis_columns());
  const hvl_t samples{row.samples.size(), const_cast<double*>(row.samples.data())};
  std::size_t payload = record.size() + row.samples.size() * sizeof(double);
#define ATTN_TEXT_COLUMN(name, width) payload += row.name.size();
#define ATTN_NUMBER_COLUMN(name, type, h5)
  ATTN_COLUMNS(ATTN_TEXT_COLUMN, ATTN_NUMBER_COLUMN)
#undef ATTN_TEXT_COLUMN
#undef ATTN_NUMBER_COLUMN
  // The samples first: a row is in the table only once its samples are.
  write_reserved(payload, [&] {
    return write_element(samples_, samples_type_, rows_.size(), index, &samples) &&
           write_element(dataset_, type_, rows_.size(), index, record.data());
  });
}

void ResultFile::append(const ResultRow& row) {
  write_row(rows_.size(), row);
  rows_.push_back(row);
}

void ResultFile::replace(std::size_t index, const ResultRow& row) {
  if (index >= rows_.size())
    throw std::out_of_range("ResultFile::replace: no row " + std::to_string(index));
  write_row(index, row);
  rows_[index] = row;
}

void ResultFile::set_attribute(const std::string& name, const std::string& value) {
  write_reserved(name.size() + value.size(), [&] {
    write_string_attribute(file_, name, value);
    return true;
  });
  attributes_[name] = value;
}

namespace {
Handle open_result_file(const std::string& path) {
  quiet_hdf5();
  if (!std::filesystem::exists(path)) throw std::runtime_error("no such file: '" + path + "'");
  if (!std::filesystem::is_regular_file(path))
    throw std::runtime_error("'" + path + "' is not a regular file");
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
