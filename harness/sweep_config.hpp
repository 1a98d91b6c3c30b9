// A sweep's configuration (bench sweep / bench run): the forms and precisions,
// the values of each axis, the options that are not swept, how each point is
// measured, and where the rows go. Plain data: bench fills it from its options
// or a run file; the parts of a sweep (axes.hpp, plan.hpp, resume.hpp,
// console.hpp, sweep_points.hpp) read it, and run_sweep (sweep.hpp) drives them.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "measure_options.hpp"
#include "registry.hpp"

namespace attn {

// An axis of a sweep: its name and values (parse_axis in axes.hpp reads them
// from a spec).
struct Axis {
  std::string name;
  std::vector<long long> values;
};

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

}  // namespace attn
