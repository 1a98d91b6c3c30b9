// Running a sweep (bench sweep / bench run). sweep.cpp drives the parts, each
// in its own file: plan.hpp (the grid of points, skipping larger L after a
// timeout or out-of-memory, predicted times), resume.hpp (the result file's
// resumption), console.hpp (table rows, the progress line with its ETA, the
// summary, the --dry-run plan), signals.hpp (Ctrl-C), measure.hpp (one point).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "axes.hpp"
#include "measure.hpp"
#include "registry.hpp"

namespace attn {

struct Sweep {
  std::vector<const Form*> forms;
  std::vector<std::string>
      precisions;  // names of Precisions; a form is measured in those it has kernels for
  Axis batch, heads, dk, dv, seq;
  std::map<std::string, Axis>
      param_values;           // of every declared parameter, by name: chunk, slots, ...
  bool dv_follows_dk = true;  // dv takes each dk (no --dv given)
  FormParams params;          // the options that are not swept
  MeasureOptions measure;
  std::string backend;  // as given to --backend: host, openmp, serial, cuda
  std::string out;
  bool fresh = false;  // replace --out instead of resuming it
  std::string json;    // Google Benchmark's JSON report of the points measured ok; empty: none
  bool dry_run =
      false;  // print the plan (points, those in --out, predicted time) and measure nothing
  std::string command_line;  // for the file's attributes and the resume hint
  std::string config_file,
      config_text;  // bench run's configuration file and its text; empty for bench sweep
};

// With dry_run, prints the planned points instead, each with what --out holds
// of it and its predicted time, and returns 0 having written nothing.
// Otherwise measures every point of the sweep that --out does not already hold as final
// (ok, oom or timeout; an `error` row is measured again and replaced), writing
// each row as it is measured; a (form, precision) pair without a kernel is
// not planned, one line says so. Returns the exit status: 0, or 128 + the
// signal number when SIGINT or SIGTERM stopped it (130 for Ctrl-C). Throws
// std::invalid_argument for bad input (a backend not built, no pair with a
// kernel, an --out that cannot be resumed), std::runtime_error when the file
// cannot be written.
int run_sweep(const Sweep& sweep);

}  // namespace attn
