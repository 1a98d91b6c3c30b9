// The HDF5 result table of a sweep: one row per measured point in the compound
// dataset /points, appended and flushed as each point finishes (an interrupted
// sweep keeps every row it measured), with the run's context as attributes of
// the root group. Layout documented in README.md ("Result files").
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace attn {

struct ResultRow {
  std::string form, family, backend, precision;
  std::string status;  // ok | oom | error
  std::string note;    // why, for a status other than ok
  std::string variant;  // the form's options beyond the shape, e.g. "mask-convention=B unscaled"
  int batch = 0, heads = 0, seq = 0, dk = 0, dv = 0, chunk = 0;  // chunk 0: not a parameter
  int slots = 0;                                                 // 0: not a parameter
  int reps = 0;                                                  // timed runs
  double time_median_s = 0, time_min_s = 0, time_max_s = 0, time_mean_s = 0;
  std::uint64_t peak_bytes = 0;  // all live Kokkos allocations of the backend's memory space
  double flops = 0, bytes = 0;   // cost model of one call
  double gflops = 0, gbps = 0;   // achieved, at the median time
  int err_heads = 0;             // (batch, head) pairs checked against the reference; 0: not checked
  double max_abs_err = 0, rel_l2_err = 0;
};

class ResultFile {
 public:
  // Creates (truncates) `path`, creating parent folders; throws
  // std::runtime_error with a one-line reason when it cannot.
  ResultFile(const std::string& path, const std::map<std::string, std::string>& attributes);
  ~ResultFile();
  ResultFile(const ResultFile&) = delete;
  ResultFile& operator=(const ResultFile&) = delete;

  void append(const ResultRow& row);  // written and flushed to disk at once

  static std::vector<ResultRow> read(const std::string& path);
  static std::map<std::string, std::string> read_attributes(const std::string& path);

 private:
  long long file_ = -1, dataset_ = -1, type_ = -1;
  unsigned long long rows_ = 0;
};

}  // namespace attn
