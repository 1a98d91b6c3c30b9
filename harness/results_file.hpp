// The HDF5 result table of a sweep: one row per measured point in the compound
// dataset /points, appended and flushed as each point finishes (an interrupted
// sweep keeps every row it measured), with the run's context as attributes of
// the root group. Layout documented in README.md ("Result files").
#pragma once
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace attn {

// The `format` root attribute of files this build writes. v8 has one column
// per swept axis (swept_axes), whatever the axes are (from v6), the
// `err_rows` column (from v7) and the `kernel` and `kernel_reason` columns;
// the older formats are still read, their shape columns (batch, heads, seq,
// dk, dv, chunk, slots) being the axes of the same names before v6: v2 files
// (no `slots` column), v3 files (no `revision` column), v4 files (no
// `time_stddev_s` and `iterations` columns, no samples), v5 and v6 files (no
// `err_rows`), v7 files (no `kernel`: their rows read as kernel "unknown").
// Only files of this format, with this build's axes, are appended to.
constexpr const char* result_format = "attn-harness points v8";

// A row's value of each axis column, in the order of the file's columns.
using AxisValues = std::vector<std::pair<std::string, int>>;

struct ResultRow {
  std::string form, family, backend, precision;
  std::string status;   // ok | oom | timeout | error
  std::string note;     // why, for a status other than ok
  std::string variant;  // the form's options beyond the shape, e.g. "mask-convention=B unscaled"
  AxisValues axes;  // batch, heads, dk, dv, seq, slots, chunk: 0 where not a parameter of the form
  int reps = 0;     // timed runs
  double time_median_s = 0, time_min_s = 0, time_max_s = 0, time_mean_s = 0;
  std::uint64_t peak_bytes = 0;  // the most bytes of the backend's memory space the point's Kokkos
                                 // allocations held at once
  double flops = 0, bytes = 0;   // cost model of one call
  double gflops = 0, gbps = 0;   // achieved, at the median time
  int err_heads = 0;  // (batch, head) pairs checked against the reference; 0: not checked
  int err_rows = 0;   // rows compared in each checked pair: seq for whole pairs, fewer sampled
                      // (error_check.hpp); 0: not checked, or a file before v7
  double max_abs_err = 0, rel_l2_err = 0;
  std::string
      revision;  // git describe --dirty of the build that measured it ("" in files before v4)
  double time_stddev_s = 0;  // of the samples (from v5; 0 before)
  int iterations = 0;  // calls per timed repetition, each sample their mean (from v5; 0 before)
  std::vector<double>
      samples;  // seconds per call of each timed repetition (from v5: the /samples dataset)
  // The kernel path that produced it (common/kernel_path.hpp: "tensor-core",
  // "portable", ...; "unknown" in files before v8, a peer's own name for its
  // rows) and why a faster path did not apply ("" when none was passed over).
  std::string kernel, kernel_reason;

  // The value of axis `name`; 0 when the row has no such column.
  int axis(const std::string& name) const;
  // Sets axis `name`, adding its column after the others when the row has none.
  void set_axis(const std::string& name, int value);
};

// What identifies a point across runs and files: two rows with equal keys
// measured the same thing. Resuming a sweep and `bench compare` match on it.
struct PointKey {
  std::string form, variant, backend, precision;
  AxisValues axes;

  bool operator<(const PointKey& other) const;
  bool operator==(const PointKey& other) const;
  // The key without axis `name`: what the points of a series over it share.
  PointKey without(const std::string& name) const;
  // "softmax/full float openmp batch=1 heads=8 dk=64 dv=64 seq=1024 chunk=64 [variant]"
  // (an axis at 0, not a parameter of the form, left out)
  std::string describe() const;
};
// The row's key: its axes in the declared order (swept_axes), then any other
// of its axes in its order, an axis at 0 left out. So a row of an older file,
// whose columns are in another order, or which has no column for an axis that
// is 0 (not a parameter of the form, as `slots` before v3), has the key of the
// same point planned now.
PointKey key_of(const ResultRow& row);
// The row's key on the named axes only, in their order, 0 included: `bench
// compare` matches two files on the axes both have.
PointKey key_on(const ResultRow& row, const std::vector<std::string>& axes);

// The axis columns of rows read from one file, whose rows all have its
// columns: the first row's; none when there are no rows.
std::vector<std::string> axes_of(const std::vector<ResultRow>& rows);

// Thrown when resuming a file that exists but is not a result file of
// `result_format` (another format, another kind of file).
struct IncompatibleResultFile : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Whether PATH exists and is an HDF5 file (of any kind: a result or a problem file).
bool is_hdf5_file(const std::string& path);
// Refuses to write text (a report, an export) over PATH where it is an HDF5
// file, someone's results: "OPTION 'PATH' is an HDF5 file; not replaced by text".
void refuse_text_over_hdf5(const std::string& path, const std::string& option);

class ResultFile {
 public:
  enum class Mode {
    fresh,   // create `path`, replacing any file there
    resume,  // keep an existing result file of this format and its rows; create it if absent
  };
  // Creates parent folders; writes `attributes` (and `format`) on a new file.
  // On resuming, the file's attributes stay as they were. Throws
  // std::runtime_error with a one-line reason when the file cannot be created,
  // or (IncompatibleResultFile) when resuming a file that is not a result file of
  // this format.
  ResultFile(const std::string& path, const std::map<std::string, std::string>& attributes,
             Mode mode = Mode::fresh);
  ~ResultFile();
  ResultFile(const ResultFile&) = delete;
  ResultFile& operator=(const ResultFile&) = delete;

  // Every row of the file, those it held when opened first, in file order.
  const std::vector<ResultRow>& rows() const { return rows_; }
  const std::map<std::string, std::string>& attributes() const { return attributes_; }
  bool resumed() const { return resumed_; }  // opened an existing file

  void append(const ResultRow& row);                      // written and flushed to disk at once
  void replace(std::size_t index, const ResultRow& row);  // rewrites row `index` in place, flushed
  void set_attribute(const std::string& name, const std::string& value);

  // Reads the rows of a v2 to v7 file: its axes are the integer columns that
  // are not identity or measurement columns, each row's `axes` in the file's
  // order (a fixed column absent from the file reads 0 or "", and the samples
  // of a file before v5 are empty).
  static std::vector<ResultRow> read(const std::string& path);
  static std::map<std::string, std::string> read_attributes(const std::string& path);

 private:
  void create(const std::string& path, const std::map<std::string, std::string>& attributes);
  void open_for_append(const std::string& path);
  void close();
  void write_row(unsigned long long index, const ResultRow& row);
  template <class Write>
  void write_reserved(std::size_t payload, const Write& write);

  std::string path_;

  long long file_ = -1, dataset_ = -1, type_ = -1;
  long long samples_ = -1, samples_type_ = -1;  // the /samples dataset: row i's samples at index i
  int lock_fd_ = -1;  // a created file's lock, held while it is open (see lock_for_writing)
  int reserve_fd_ =
      -1;  // the file again, to reserve the space of a write first (see write_reserved)
  std::vector<ResultRow> rows_;
  std::map<std::string, std::string> attributes_;
  bool resumed_ = false;
};

}  // namespace attn
