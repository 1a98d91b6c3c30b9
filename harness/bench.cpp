// bench: list the attention forms, sweep them over shapes (timing each point,
// measuring its peak memory and its error against the fp64 reference) into an
// HDF5 table, and compare two such tables. `bench --help` explains.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <benchmark/benchmark.h>
#include <boost/program_options.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <unistd.h>

#include "axes.hpp"
#include "ceiling.hpp"
#include "common/host_vectors.hpp"
#include "common/kernel_path.hpp"
#include "compare.hpp"
#include "conformance.hpp"
#include "error_check.hpp"
#include "export.hpp"
#include "import_rows.hpp"
#include "inputs.hpp"
#include "memory.hpp"
#include "plan.hpp"
#include "problem_file.hpp"
#include "provenance.hpp"
#include "registry.hpp"
#include "sweep.hpp"
#include "sweep_points.hpp"
#include "tuning_options.hpp"
#ifdef ATTN_MPI
#include "distributed.hpp"
#endif
#include "text.hpp"

namespace po = boost::program_options;
using namespace attn;

namespace {

constexpr const char* overview = R"(usage:
  bench list [--format json]      every form, its family, parameters, precisions and description
  bench sweep [options]           measure forms over a grid of shapes into an HDF5 file
  bench run FILE.cfg [options]    a sweep whose options are read from FILE
  bench ceiling                   this CPU's fp32 FMA and copy ceilings (OpenMP threads, about
                                  a second); a sweep on the host records them for the roofline
  bench compare A.h5 B.h5 [options]
                                  per point B's time and peak memory over A's, each difference
                                  judged by a significance test on the samples
  bench compare FILE.h5 --peer NAME
                                  the same for our rows against a peer's in one file
  bench export FILE.h5 --format csv|json|markdown [--out FILE]
                                  the rows of a result file, every column with a header
  bench problem --form F [options] --out P.h5
                                  one point's random inputs (and with --reference the fp64
                                  reference's results) for a runner outside the harness
  bench cases --form F [--precision P] --out DIR
                                  the form's conformance cases (the equivalence suite's), each
                                  a problem file with its fp64 reference and tolerance
  bench verify --form F --impl MODULE:FUNCTION [options]
                                  runs an implementation of yours on every conformance case and
                                  says which pass (a Python runner, docs/verify.md)
  bench import FILE.h5 ROWS.jsonl rows measured elsewhere (JSON Lines) into a result file
  bench sweep --list-points [options]
                                  the planned points as JSON lines; nothing measured
  bench --version                 the build: git revision, whether its tree was dirty, build type
  bench COMMAND --help            what COMMAND does and the options it takes
)";

constexpr const char* sweep_notes = R"(
Sizes take lists and ranges: 1k..128k = 1024, 2048, ..., 131072 (powers of two);
1k..8k:1k = 1024, 2048, 3072, ..., 8192 (a..b:step, linear); 1k,3k,5000 = 1024,
3072, 5000 (k = 1024, m = 1024^2). Every combination is one point; a
parameter a form does not take (e.g. --chunk for softmax/full) is not swept for it.

Timing: each point is a Google Benchmark with manual timing between fences:
--warmup untimed calls, then --reps repetitions (its --benchmark_repetitions),
each of one call, or of as many calls as --min-time needs (its
--benchmark_min_time); a repetition's time per call is one sample. With
--max-noise, --reps more repetitions run while the samples' coefficient of
variation exceeds it (up to --max-reps repetitions, --max-time seconds).

Resuming: re-running a sweep with the same --out keeps the rows already there and
measures only the points missing (rows with status ok, oom or timeout are final;
error rows are measured again); other measurement settings (--seed, --warmup,
--reps, --min-time, --max-noise, --max-reps, --max-time, --flush-cache,
--check-flops, --check-rows) than the file's are refused. --fresh starts the file over.
Ctrl-C finishes the current point, closes the file and exits 130 (Ctrl-C
twice: abandon the point).

Statuses: ok; oom (the inputs cannot fit, or an allocation failed); timeout (the
point's calls ran past --point-timeout); error (anything else, see the note; a
point whose sizes overflow the kernels' int indices is an error row, not run).
After a timeout or oom, the larger L of the same form and shape are recorded with
that status without running ("skipped: a shorter L ..."). With --point-timeout, a
point whose calls are predicted to run past it (the form's largest L measured ok,
its time per call scaled by the cost model's flops) is recorded as timeout without
running ("skipped: ... calls predicted to take ...").
)";

// A form's declared option as bench sweep and bench run take it: a switch as
// a flag that also takes an explicit true or false (`--unscaled false`, as
// --list-points writes options and a runner passes them back, is off: a flag
// alone would read it as on and the `false` as a stray word), a number or a
// choice as a value with its default.
template <class T>
const po::value_semantic* with_default(const OptionValue& value) {
  return po::value<T>()->default_value(std::get<T>(value));
}
void add_declared_option(po::options_description& o, const OptionSpec& option) {
  using Kind = OptionSpec::Kind;
  const po::value_semantic* value =
      option.kind == Kind::switch_
          ? po::value<bool>()->default_value(false, "false")->implicit_value(true, "true")
      : option.kind == Kind::number ? with_default<double>(option.default_value)
                                    : with_default<std::string>(option.default_value);
  o.add_options()(option.name.c_str(), value, option.help.c_str());
}

// The sizes, the families' swept parameters and their options: lists of
// values for a sweep (`lists`), one value each for bench problem.
void add_shape_options(po::options_description& o, bool lists) {
  const auto size = [&](const char* name, const char* list_default, const char* one_default,
                        const char* one, const char* many) {
    o.add_options()(name,
                    po::value<std::string>()->default_value(lists ? list_default : one_default),
                    lists ? many : one);
  };
  size("seq", "1k..16k", "1k", "sequence length L", "sequence lengths L");
  size("batch", "1", "1", "batch size B", "batch sizes B");
  size("heads", "8", "8", "head count H", "head counts H");
  size("dk", "64", "64", "query/key head size", "query/key head sizes");
  o.add_options()(
      "dv", po::value<std::string>(),
      lists ? "value head sizes (default: equal to dk)" : "value head size (default: equal to dk)");
  for (const Param& param : declared_params())
    o.add_options()(param.name.c_str(),
                    po::value<std::string>()->default_value(param.default_values),
                    param.help.c_str());
  for (const OptionSpec& option : declared_options()) add_declared_option(o, option);
}

// A command's options, with a word that is none of them refused (`problem ...
// stray`, `list extra`) rather than ignored; not yet notified.
po::variables_map parse_command_options(const std::vector<std::string>& args,
                                        const po::options_description& options,
                                        const std::string& command) {
  const auto parsed = po::command_line_parser(args).options(options).allow_unregistered().run();
  for (const auto& word : po::collect_unrecognized(parsed.options, po::include_positional))
    throw std::invalid_argument(fmt::format(
        "{} '{}' (see bench {} --help)",
        word.rfind('-', 0) == 0 ? "unrecognised option" : "unexpected argument", word, command));
  po::variables_map vm;
  po::store(parsed, vm);
  return vm;
}

// Whether two paths name one file: the same path once absolute and normal
// (links followed as far as they exist), or one existing file by two names.
bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec_a, ec_b, ec;
  if (fs::weakly_canonical(a, ec_a) == fs::weakly_canonical(b, ec_b) && !ec_a && !ec_b) return true;
  return fs::equivalent(a, b, ec);
}

po::options_description sweep_options() {
  po::options_description o("sweep options");
  o.add_options()("help,h", "this help")(
      "forms", po::value<std::string>()->default_value("all"),
      "forms or families, comma-separated (see bench list), or all");
  add_shape_options(o, true);
  o.add_options()(
      "precision", po::value<std::string>()->default_value("float"),
      "precisions, comma-separated, or all (= float,double,tf32,bf16): float: fp32 storage, "
      "fp32-accurate "
      "products (3xTF32 on tensor cores); tf32: fp32 storage, one TF32 product; bf16: bf16 "
      "storage, fp32 "
      "accumulation and softmax statistics; double: fp64. A form without a kernel in a precision "
      "is skipped "
      "there (bench list shows each form's)")(
      "backend", po::value<std::string>(),
      "execution space: host, cuda (default: cuda when built with it, else host)")(
      "require-path", po::value<std::string>()->default_value(""),
      "a kernel path every point must take (tensor-core, portable, head-blocks, ...: bench "
      "list): a point whose kernel would take another is an error row saying why, not a "
      "slower row under the same form name")("seed",
                                             po::value<std::string>()->default_value("2024"),
                                             "seed of the random inputs (a whole number >= 0)")(
      "reps", po::value<int>()->default_value(10),
      "timed repetitions per point (Google Benchmark's "
      "--benchmark_repetitions): median, mean, min, max, stddev")(
      "warmup", po::value<int>()->default_value(1), "untimed calls before timing")(
      "min-time", po::value<double>()->default_value(0),
      "seconds a repetition lasts at least (Google Benchmark's --benchmark_min_time): it times as "
      "many calls as "
      "reach it, found in the first repetition, and its sample is their mean; 0: one call per "
      "repetition")("max-noise", po::value<double>()->default_value(0),
                    "relative noise to reach: while the coefficient of variation (stddev/mean) of "
                    "a point's samples exceeds it, "
                    "--reps more repetitions run, up to --max-reps repetitions or --max-time "
                    "seconds of timed calls (0.02: 2%; "
                    "0: --reps repetitions only)")(
      "max-reps", po::value<int>()->default_value(100),
      "with --max-noise: the most repetitions of a point")(
      "max-time", po::value<double>()->default_value(10),
      "with --max-noise: the most seconds of timed calls of a point")(
      "flush-cache", po::bool_switch(),
      "before each timed call, overwrite a buffer of 4x the last-level cache "
      "(the CPU's; the GPU's L2) in the backend's memory: cold-cache timings")(
      "check-flops", po::value<double>()->default_value(2e10),
      "largest fp64 reference cost (FLOPs) spent on the error check of a point: whole "
      "(batch, head) pairs where one fits, else --check-rows sampled rows, at least 4 (0: no "
      "error check)")(
      "check-rows", po::value<int>()->default_value(16),
      "rows of the first and last (batch, head) pair checked where a whole pair's reference "
      "exceeds --check-flops: the first and last rows, each side of the first and last chunk "
      "(or 64-row tile) boundaries, and random rows; 0: such points are not checked")(
      "point-timeout", po::value<double>(),
      "seconds a point's warm-up and timed calls may take (default: no limit); "
      "read after each call, as a running kernel cannot be stopped, so a point "
      "overruns it by at most one call; the point is then recorded as timeout "
      "and its larger L are skipped (input drawing and the error check do not count); "
      "a point predicted to run past it is not run")(
      "out", po::value<std::string>(), "output HDF5 file (required); an existing one is resumed")(
      "fresh", po::bool_switch(), "start --out over instead of resuming it")(
      "json", po::value<std::string>(),
      "also write Google Benchmark's JSON report of the points measured ok in this "
      "run to this file (read by its tools/compare.py)")(
      "dry-run", po::bool_switch(),
      "print the planned points, what --out holds of each and the predicted time "
      "(from --out's rows); measure and write nothing")(
      "list-points", po::bool_switch(),
      "print each planned point as a JSON object a line (form, family, precision, backend, "
      "variant, options, axes), for a runner outside the harness; measure, read and write "
      "nothing (--out not needed)");
  // How the kernels choose where the choice changes speed only (common/tuning.hpp):
  // a row measured with another value than the default names it in its variant.
  for (const TuningOption& option : tuning_options())
    o.add_options()(option.name.c_str(),
                    po::value<std::string>()->default_value(option.default_value),
                    (option.help + " (a row not at the default names it in its variant)").c_str());
  return o;
}

po::options_description compare_options() {
  po::options_description o("compare options");
  o.add_options()("help,h", "this help")(
      "threshold", po::value<double>(),
      "mark points significantly slower with a B/A time above it REGRESSION "
      "(significantly faster below 1/it: faster); a point ok in A and not in B "
      "is a REGRESSION too")("fail-on-regression", po::bool_switch(),
                             "exit 1 when a point is a REGRESSION (threshold 1.1 unless given)")(
      "across-kernels", po::bool_switch(),
      "compare points whose rows ran different kernel paths (refused otherwise: a change of "
      "path is not a faster kernel); each such point is marked A-path -> B-path")(
      "peer", po::value<std::string>(),
      "one file: a peer's rows (variant peer=NAME, e.g. torch.sdpa) as A against ours as B, "
      "B/A our time over the peer's")(
      "peer-precision", po::value<std::string>(),
      "OURS=THEIRS, with --peer: our rows of precision OURS against the peer's rows of "
      "precision THEIRS instead of its OURS rows (its THEIRS rows still meet ours of THEIRS), "
      "e.g. tf32=float (fla's fp32 multiplies in TF32)");
  return o;
}

constexpr const char* compare_notes = R"(
Points are matched by form, variant, backend, precision and the axis columns
(batch, heads, seq, ...) both files have; points whose rows name different
kernel paths (the `kernel` column; "unknown" before format v8 matches any)
are compared only with --across-kernels. Each
difference of two points ok in both files is judged by the two-sided
Mann-Whitney U test on their samples (as Google Benchmark's compare.py does):
p < 0.05 is a significant change (slower or faster), otherwise "no significant
change". Files without samples (before format v5) are judged by --threshold
alone, with a note.
With --peer NAME, one file: a peer's rows (experiments/peers) as A and ours
as B, each variant of ours beside the peer's row of its point, with both
sides' GFLOP/s; every line names our kernel path. A peer that has no rows of
one of our precisions may stand there with its rows of another:
--peer-precision tf32=float sets our tf32 rows against fla's float ones,
whose products are TF32 (results/README.md, "The public implementations").
)";

// One command's help: its usage line, what it does, and its options only.
std::string command_help(const std::string& usage, const po::options_description& options,
                         const std::string& notes = "") {
  std::ostringstream text;
  text << "usage: " << usage << '\n' << notes << '\n' << options;
  return text.str();
}

std::vector<const Form*> select_forms(const std::string& spec) {
  std::vector<const Form*> chosen;
  for (const auto& word : split_list("forms", spec)) {
    bool matched = false;
    for (const auto& f : forms()) {
      if (word == "all" || f.name == word || f.family == word) {
        if (std::find(chosen.begin(), chosen.end(), &f) == chosen.end()) chosen.push_back(&f);
        matched = true;
      }
    }
    if (!matched)
      throw std::invalid_argument("--forms: unknown form '" + word + "' (see bench list)");
  }
  return chosen;
}

// --precision: names of Precisions or `all`, each once, in the order given.
std::vector<std::string> select_precisions(const std::string& spec) {
  const std::vector<std::string> known = precision_names();
  std::vector<std::string> chosen;
  for (const auto& word : split_list("precision", spec)) {
    if (word != "all" && !is_precision_name(word))
      throw std::invalid_argument(
          fmt::format("--precision: unknown precision '{}' (expected {} or all)", word,
                      fmt::join(known, ", ")));
    for (const auto& name : known)
      if ((word == "all" || word == name) &&
          std::find(chosen.begin(), chosen.end(), name) == chosen.end())
        chosen.push_back(name);
  }
  return chosen;
}

// A real-valued option, refused with one line unless finite and at least
// `minimum` (above it when `above`): NaN or infinity would silently disable or
// wreck what it sets (--check-flops nan turned the error check off).
double number_option(const po::variables_map& vm, const std::string& name, double minimum,
                     bool above, const std::string& hint = "") {
  const double x = vm[name].as<double>();
  if (!std::isfinite(x) || x < minimum || (above && x == minimum))
    throw std::invalid_argument(fmt::format("--{} must be a finite number {} {:g}{}", name,
                                            above ? ">" : ">=", minimum, hint));
  return x;
}

// The value of a declared option; a number must be finite and above 0, a
// choice one of its words.
OptionValue declared_option_value(const po::variables_map& vm, const OptionSpec& option) {
  switch (option.kind) {
    case OptionSpec::Kind::switch_:
      return vm[option.name].as<bool>();
    case OptionSpec::Kind::number:
      return number_option(vm, option.name, 0, true);
    case OptionSpec::Kind::choice:
      break;
  }
  const std::string word = vm[option.name].as<std::string>();
  const auto& choices = option.choices;
  if (std::find(choices.begin(), choices.end(), word) == choices.end())
    throw std::invalid_argument(
        fmt::format("--{}: '{}' is {}", option.name, word,
                    choices.size() == 2 ? fmt::format("neither {} nor {}", choices[0], choices[1])
                                        : fmt::format("not one of {}", fmt::join(choices, ", "))));
  return word;
}

// Adds a `bench run` experiment file to vm: `name = value` lines, `#` comments.
// Options already in vm (the command line's) win. A line that is not an
// option of bench sweep is an error naming the file and line. Returns the
// file's text for the result file (bytes of no UTF-8 character as \xNN).
// Where an experiment file set each option it set (the command line's win):
// "FILE:LINE" by option name.
using SetIn = std::map<std::string, std::string>;

std::string store_experiment_file(const std::string& path, const po::options_description& options,
                                  po::variables_map& vm, SetIn& set_in) {
  std::ifstream in(path);
  if (!std::filesystem::is_regular_file(path) || !in)
    throw std::invalid_argument("cannot read experiment file '" + path + "'");
  auto trim = [](std::string s) {
    const auto first = s.find_first_not_of(" \t\r");
    return first == std::string::npos ? std::string()
                                      : s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
  };
  std::set<std::string> seen;
  std::string text_of_file;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (number == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0)
      line.erase(0, 3);  // a UTF-8 byte-order mark
    // A control byte (a NUL, or a binary file): say where, never echo the bytes.
    const auto control = std::find_if(line.begin(), line.end(), [](unsigned char c) {
      return c < 0x20 && c != '\t' && c != '\r';
    });
    if (control != line.end())
      throw std::invalid_argument(
          fmt::format("{}:{}: byte 0x{:02x} at column {}: not a text configuration file", path,
                      number, static_cast<unsigned char>(*control), control - line.begin() + 1));
    text_of_file += printable(line) + "\n";
    const std::string text = trim(line.substr(0, line.find('#')));
    if (text.empty()) continue;
    const auto where = fmt::format("{}:{}", path, number);
    const auto equals = text.find('=');
    const std::string name = trim(text.substr(0, equals));
    if (equals == std::string::npos || name.empty())
      throw std::invalid_argument(
          fmt::format("{}: expected 'name = value', got '{}'", where, text));
    if (!options.find_nothrow(name, false) || name == "help")
      throw std::invalid_argument(
          fmt::format("{}: unknown option '{}' (see bench --help)", where, name));
    // An experiment describes what to measure; replacing a file (a result file
    // started over, a JSON report written over whatever it names) needs the
    // person's own command line, not a file someone else wrote.
    if (name == "fresh" || name == "json")
      throw std::invalid_argument(
          fmt::format("{}: '{}' replaces a file and is taken from the command line only (--{})",
                      where, name, name));
    if (!seen.insert(name).second)
      throw std::invalid_argument(fmt::format("{}: '{}' is given twice", where, name));
    po::parsed_options parsed(&options);
    parsed.options.emplace_back(name, std::vector<std::string>{trim(text.substr(equals + 1))});
    if (!vm.count(name) || vm[name].defaulted()) set_in[name] = where;
    try {
      po::store(parsed, vm);
    } catch (const po::error& e) {
      throw std::invalid_argument(fmt::format("{}: {}", where, e.what()));
    }
  }
  return text_of_file;
}

// An error about option --NAME (the message starts so) whose value came from
// the experiment file: with the file and line first.
std::string located(const std::string& message, const SetIn& set_in) {
  if (message.rfind("--", 0) != 0) return message;
  const std::string name = message.substr(2, message.find_first_of(" :='", 2) - 2);
  const auto at = set_in.find(name);
  return at == set_in.end() ? message : at->second + ": " + message;
}

// --seed: a whole number from 0 to 10^19 - 1.
std::uint64_t seed_option(const po::variables_map& vm) {
  const std::string seed = vm["seed"].as<std::string>();
  if (seed.empty() || seed.size() > 19 || seed.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument("--seed '" + seed + "': not a whole number from 0 to 10^19 - 1");
  return std::stoull(seed);
}

// The axes (--seq, --batch, ..., the declared parameters) and the declared
// options, as bench sweep and bench problem take them.
void read_axes_and_options(const po::variables_map& vm, Sweep& sweep) {
  sweep.seq = parse_axis("seq", vm["seq"].as<std::string>());
  sweep.batch = parse_axis("batch", vm["batch"].as<std::string>());
  sweep.heads = parse_axis("heads", vm["heads"].as<std::string>());
  sweep.dk = parse_axis("dk", vm["dk"].as<std::string>());
  sweep.dv_follows_dk = !vm.count("dv");
  sweep.dv = sweep.dv_follows_dk ? Axis{"dv", {0}} : parse_axis("dv", vm["dv"].as<std::string>());
  for (const Param& param : declared_params())
    sweep.param_values[param.name] = parse_axis(param.name, vm[param.name].as<std::string>());
  for (const OptionSpec& option : declared_options())
    sweep.params.options.set(option.name, declared_option_value(vm, option));
}

// The sweep the options describe, every value checked (before Kokkos starts,
// so that a bad option gets its one line and nothing else).
Sweep sweep_from(const po::variables_map& vm, const std::string& command_line) {
  if (!vm.count("out") && !vm["list-points"].as<bool>())
    throw std::invalid_argument("--out is required: the HDF5 file to write");
  Sweep sweep;
  sweep.forms = select_forms(vm["forms"].as<std::string>());
  sweep.precisions = select_precisions(vm["precision"].as<std::string>());
  read_axes_and_options(vm, sweep);
  for (const TuningOption& option : tuning_options())
    option.set(tuning(), vm[option.name].as<std::string>());
  sweep.measure.require_path = vm["require-path"].as<std::string>();
  if (const std::string& path = sweep.measure.require_path;
      !path.empty() &&
      std::find(std::begin(paths::parts), std::end(paths::parts), path) == std::end(paths::parts))
    throw std::invalid_argument(fmt::format("--require-path '{}': expected one of {}",
                                            printable(path), fmt::join(paths::parts, ", ")));
  sweep.measure.seed = seed_option(vm);
  sweep.measure.reps = vm["reps"].as<int>();
  sweep.measure.warmup = vm["warmup"].as<int>();
  sweep.measure.check_flops = number_option(vm, "check-flops", 0, false, " (0: no error check)");
  sweep.measure.check_rows = vm["check-rows"].as<int>();
  if (sweep.measure.check_rows < 0 || sweep.measure.check_rows > 4096)
    throw std::invalid_argument(
        fmt::format("--check-rows {}: from 0 to 4096", sweep.measure.check_rows));
  if (sweep.measure.reps < 1) throw std::invalid_argument("--reps must be at least 1");
  // Each repetition is a Google Benchmark run whose sample is kept, and each
  // costs its own set-up even past --point-timeout: a bound, not hours and GBs.
  constexpr int most_reps = 100000;
  for (const char* option : {"reps", "max-reps"})
    if (vm[option].as<int>() > most_reps)
      throw std::invalid_argument(
          fmt::format("--{} {}: at most {} (each repetition's sample is kept)", option,
                      vm[option].as<int>(), most_reps));
  if (sweep.measure.warmup < 0) throw std::invalid_argument("--warmup must not be negative");
  sweep.measure.min_time_s =
      number_option(vm, "min-time", 0, false, " (seconds; 0: one call per repetition)");
  sweep.measure.max_noise =
      number_option(vm, "max-noise", 0, false, " (0.02: 2%; 0: no noise target)");
  sweep.measure.max_reps = vm["max-reps"].as<int>();
  if (sweep.measure.max_reps < 1) throw std::invalid_argument("--max-reps must be at least 1");
  if (!vm["max-reps"].defaulted() && sweep.measure.max_reps < sweep.measure.reps)
    throw std::invalid_argument(
        fmt::format("--max-reps {} is below --reps {}: a point takes --reps repetitions at least",
                    sweep.measure.max_reps, sweep.measure.reps));
  sweep.measure.max_time_s = number_option(vm, "max-time", 0, true, " (seconds)");
  sweep.measure.flush_cache = vm["flush-cache"].as<bool>();
  if (vm.count("point-timeout"))
    sweep.measure.point_timeout_s = number_option(vm, "point-timeout", 0, true, " (seconds)");
  if (vm.count("out")) sweep.out = vm["out"].as<std::string>();
  sweep.fresh = vm["fresh"].as<bool>();
  sweep.dry_run = vm["dry-run"].as<bool>();
  if (vm.count("json")) sweep.json = vm["json"].as<std::string>();
  // A name with a control byte (an escape sequence) would be echoed raw to the
  // terminal in every progress line: refused.
  for (const auto& [option, name] : {std::pair{"out", sweep.out}, std::pair{"json", sweep.json}})
    if (std::any_of(name.begin(), name.end(),
                    [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
      throw std::invalid_argument(
          fmt::format("--{} '{}': a control character in a file name", option, name));
  if (!sweep.json.empty() && same_file(sweep.json, sweep.out))
    throw std::invalid_argument("--json '" + sweep.json +
                                "' is the result file (--out): give it a name of its own");
#ifdef KOKKOS_ENABLE_CUDA
  sweep.backend = vm.count("backend") ? vm["backend"].as<std::string>() : "cuda";
#else
  sweep.backend = vm.count("backend") ? vm["backend"].as<std::string>() : "host";
#endif
  sweep.command_line = command_line;
  return sweep;
}

// OpenMP threads bound and spread over the cores unless the user chose
// otherwise: the setting Kokkos recommends (it warns without one), and the
// fastest for a machine running nothing else. Set before Kokkos (and OpenMP)
// start, which read them once.
void default_openmp_placement() {
  setenv("OMP_PROC_BIND", "spread", /*overwrite=*/0);
  setenv("OMP_PLACES", "threads", /*overwrite=*/0);
}

// A subcommand's options and the file names that follow it (compare, export).
struct OptionsAndFiles {
  po::variables_map vm;
  std::vector<std::string> files;
};
OptionsAndFiles parse_options_and_files(const std::vector<std::string>& args,
                                        const po::options_description& options) {
  po::options_description all;
  all.add(options).add_options()("files", po::value<std::vector<std::string>>());
  po::positional_options_description positional;
  positional.add("files", -1);
  OptionsAndFiles parsed;
  po::store(po::command_line_parser(args).options(all).positional(positional).run(), parsed.vm);
  po::notify(parsed.vm);
  if (parsed.vm.count("files")) parsed.files = parsed.vm["files"].as<std::vector<std::string>>();
  return parsed;
}

// --peer-precision OURS=THEIRS, each a precision bench knows.
CompareOptions::PeerPrecision peer_precision_option(const std::string& text) {
  const auto equals = text.find('=');
  const CompareOptions::PeerPrecision pair{
      text.substr(0, equals), equals == std::string::npos ? "" : text.substr(equals + 1)};
  if (equals == std::string::npos || !is_precision_name(pair.ours) ||
      !is_precision_name(pair.theirs))
    throw std::invalid_argument(
        fmt::format("--peer-precision '{}': expected OURS=THEIRS, two of {} (e.g. tf32=float)",
                    printable(text), fmt::join(precision_names(), ", ")));
  return pair;
}

int compare_command(const std::vector<std::string>& args) {
  const auto [vm, files] = parse_options_and_files(args, compare_options());
  if (vm.count("help")) {
    fmt::print(
        "{}\n",
        command_help(
            "bench compare A.h5 B.h5 [options]\n       bench compare FILE.h5 --peer NAME [options]",
            compare_options(), compare_notes));
    return 0;
  }
  const bool peer = vm.count("peer") > 0;
  if (peer && files.size() != 1)
    throw std::invalid_argument(
        "compare --peer takes one result file: bench compare FILE.h5 --peer NAME");
  if (!peer && files.size() != 2)
    throw std::invalid_argument("compare needs two result files: bench compare A.h5 B.h5");
  CompareOptions compare;
  compare.fail_on_regression = vm["fail-on-regression"].as<bool>();
  compare.across_kernels = vm["across-kernels"].as<bool>();
  if (vm.count("threshold"))
    compare.threshold = number_option(vm, "threshold", 1, false, " (1.1: more than 10% slower)");
  else if (compare.fail_on_regression)
    compare.threshold = 1.1;
  if (vm.count("peer-precision")) {
    if (!peer) throw std::invalid_argument("compare --peer-precision needs --peer NAME");
    compare.peer_precision = peer_precision_option(vm["peer-precision"].as<std::string>());
  }
  return peer ? compare_with_peer(files[0], vm["peer"].as<std::string>(), compare)
              : compare_result_files(files[0], files[1], compare);
}

constexpr const char* list_notes = R"(
Every form: its family, whether it is causal, its parameters (the swept ones,
then its options: bench sweep --help), the precisions it has kernels for, and
what it computes (json: an array of objects, each also with the options the
form declares: name, kind, default, choices and help; and the tensors: name,
shape, role and how an input is drawn). Then the kernel paths each form's
kernels take on each backend of this build: at B = H = 1, L = 4096, d = 64
and every parameter's default, then those a head of 256 columns or a chunk
of 16 or 96 reaches, each with why a faster path did not apply (json: each
form's kernel_paths: backend, precisions, path, reason and probe).
)";

std::string json_list(const std::vector<std::string>& words) {
  std::vector<std::string> quoted;
  for (const auto& w : words) quoted.push_back(json_string(w));
  return fmt::format("[{}]", fmt::join(quoted, ", "));
}

// A form's declared tensors: {"name": "q", "shape": ["B", "H", "L", "dk"], "role": "input",
// "draw": "normal"}.
std::vector<std::string> tensor_objects(const Form& f) {
  std::vector<std::string> objects;
  for (const TensorSpec& t : f.tensors) {
    std::vector<std::string> sizes;
    for (Size size : t.shape) sizes.push_back(json_string(size_name(size)));
    objects.push_back(fmt::format("{{\"name\": {}, \"shape\": [{}], \"role\": {}, \"draw\": {}}}",
                                  json_string(t.name), fmt::join(sizes, ", "),
                                  json_string(role_name(t.role)),
                                  json_string(t.draw ? t.draw->name : "none")));
  }
  return objects;
}

// Its declared options: {"name": "mask-convention", "kind": "choice", "default": "A",
// "choices": ["A", "B"], "help": "..."}.
std::vector<std::string> option_objects(const Form& f) {
  std::vector<std::string> objects;
  for (const OptionSpec& o : f.options)
    objects.push_back(fmt::format(
        "{{\"name\": {}, \"kind\": {}, \"default\": {}, \"choices\": {}, \"help\": {}}}",
        json_string(o.name), json_string(kind_name(o.kind)),
        std::visit(
            [](const auto& v) {
              using V = std::decay_t<decltype(v)>;
              if constexpr (std::is_same_v<V, std::string>)
                return json_string(v);
              else
                return fmt::format("{}", v);
            },
            o.default_value),
        json_list(o.choices), json_string(o.help)));
  return objects;
}

// The paths its kernels take: {"backend": "cuda", "precisions": ["float"], "path":
// "portable", "reason": "chunk 100 is not a multiple of 16", "probe": "chunk=100"}.
std::vector<std::string> path_objects(const Form& f) {
  std::vector<std::string> objects;
  for (const PathSeen& p : kernel_paths_seen(f))
    objects.push_back(fmt::format(
        "{{\"backend\": {}, \"precisions\": {}, \"path\": {}, \"reason\": {}, \"probe\": {}}}",
        json_string(p.backend), json_list(p.precisions), json_string(p.path.name),
        json_string(p.path.reason), json_string(p.probe)));
  return objects;
}

// The parameters a form takes: its swept ones, then its options.
std::vector<std::string> params_of(const Form& f) {
  std::vector<std::string> params;
  for (const Param& p : f.params) params.push_back(p.name);
  for (const OptionSpec& o : f.options) params.push_back(o.name);
  return params;
}

// bench list --format json: an array of one object per form.
void print_forms_json() {
  fmt::print("[");
  for (std::size_t i = 0; i < forms().size(); ++i) {
    const Form& f = forms()[i];
    fmt::print(
        "{}\n  {{\"name\": {}, \"family\": {}, \"causal\": {}, \"params\": {}, \"options\": "
        "[{}], \"precisions\": {}, \"tensors\": [{}], \"kernel_paths\": [{}], "
        "\"description\": {}}}",
        i ? "," : "", json_string(f.name), json_string(f.family), f.causal() ? "true" : "false",
        json_list(params_of(f)), fmt::join(option_objects(f), ", "), json_list(f.precisions()),
        fmt::join(tensor_objects(f), ", "), fmt::join(path_objects(f), ", "),
        json_string(f.description));
  }
  fmt::print("\n]\n");
}

// bench list: a table of the forms, then the kernel paths of each.
void print_forms_text() {
  std::size_t params_width = 22;
  for (const Form& f : forms())
    params_width = std::max(params_width, fmt::format("{}", fmt::join(params_of(f), ",")).size());
  fmt::print("{:<26} {:<10} {:<7} {:<{}} {:<23} {}\n", "form", "family", "causal", "params",
             params_width, "precisions", "description");
  for (const Form& f : forms()) {
    const std::vector<std::string> params = params_of(f);
    fmt::print("{:<26} {:<10} {:<7} {:<{}} {:<23} {}\n", f.name, f.family,
               f.causal() ? "yes" : "no",
               params.empty() ? "-" : fmt::format("{}", fmt::join(params, ",")), params_width,
               fmt::format("{}", fmt::join(f.precisions(), ",")), f.description);
  }
  fmt::print(
      "\nkernel paths (at B = H = 1, L = 4096, d = 64, each parameter its default; then what a\n"
      "head of 256 columns or a chunk of 16 or 96 changes, and why):\n");
  for (const Form& f : forms()) {
    bool first = true;
    for (const PathSeen& p : kernel_paths_seen(f)) {
      fmt::print("{:<26} {} {}{}: {}{}\n", first ? f.name : "", p.backend,
                 fmt::join(p.precisions, ","), p.probe.empty() ? "" : " at " + p.probe, p.path.name,
                 p.path.reason.empty() ? "" : " (" + p.path.reason + ")");
      first = false;
    }
  }
}

int list_command(const std::vector<std::string>& args) {
  po::options_description options("list options");
  options.add_options()("help,h", "this help")(
      "format", po::value<std::string>()->default_value("text"), "text (a table) or json");
  po::variables_map vm = parse_command_options(args, options, "list");
  po::notify(vm);
  if (vm.count("help")) {
    fmt::print("{}\n", command_help("bench list [--format text|json]", options, list_notes));
    return 0;
  }
  const std::string format = vm["format"].as<std::string>();
  if (format != "text" && format != "json")
    throw std::invalid_argument("--format '" + format + "': expected text or json");
  if (format == "json")
    print_forms_json();
  else
    print_forms_text();
  return 0;
}

int export_command(const std::vector<std::string>& args) {
  po::options_description options("export options");
  options.add_options()("help,h", "this help")("format", po::value<std::string>(),
                                               "csv, json or markdown")(
      "out", po::value<std::string>(), "the file to write (default: stdout)");
  const auto [vm, files] = parse_options_and_files(args, options);
  if (vm.count("help")) {
    fmt::print(
        "{}\n",
        command_help(
            "bench export FILE.h5 --format csv|json|markdown [--out FILE]", options,
            "\nThe rows of a result file, every column of its table with a header (json: one\n"
            "object per row), on stdout or into --out.\n"));
    return 0;
  }
  if (files.size() != 1)
    throw std::invalid_argument(
        "export needs one result file: bench export FILE.h5 --format csv|json|markdown");
  if (!vm.count("format"))
    throw std::invalid_argument("--format is required: csv, json or markdown");
  const ExportFormat format = export_format(vm["format"].as<std::string>());
  std::string text;
  try {
    text = export_rows(ResultFile::read(files[0]), format);
  } catch (const std::runtime_error& e) {  // a file missing, not a result file, or damaged
    throw std::invalid_argument(fmt::format("export: {}", e.what()));
  }
  if (!vm.count("out")) {
    fmt::print("{}", text);
    return 0;
  }
  const std::string out = vm["out"].as<std::string>();
  if (same_file(out, files[0]))
    throw std::invalid_argument("export: --out '" + out + "' is the result file it reads");
  refuse_text_over_hdf5(out, "export: --out");
  std::ofstream file(out, std::ios::binary);
  file << text;
  file.close();
  if (!file) throw std::invalid_argument("export: cannot write '" + out + "'");
  return 0;
}

po::options_description problem_options() {
  po::options_description o("problem options");
  o.add_options()("help,h", "this help")("form", po::value<std::string>(),
                                         "the form (see bench list); required");
  add_shape_options(o, false);
  o.add_options()("seed", po::value<std::string>()->default_value("2024"),
                  "seed of the random inputs, as bench sweep --seed: the same seed draws the "
                  "same inputs as a sweep's point")(
      "reference", po::bool_switch(),
      "also write the fp64 reference's results on the inputs (/reference/<name>), computed on "
      "the host: what a sweep's error check compares against")(
      "reference-rows", po::value<int>()->default_value(0),
      "with --reference: the results at this many sampled rows of each (batch, head) pair "
      "only, the rows a sweep's check samples with --check-rows N at this point "
      "(/reference_rows); 0: every row")(
      "reference-pairs", po::value<int>()->default_value(0),
      "with --reference: the results of 1 or 2 (batch, head) pairs only, those a sweep's check "
      "takes when its budget covers fewer than every pair: 1 the first, 2 the first and last "
      "(/reference_pairs); 0: every pair")(
      "max-bytes", po::value<double>()->default_value(4294967296.0, "4294967296 (4 GiB)"),
      "refuse a problem whose float64 inputs (and reference results) take more host bytes")(
      "max-reference-flops", po::value<double>()->default_value(1e12),
      "with --reference: refuse a problem whose fp64 reference costs more FLOPs (the cost "
      "model's; the reference runs on the host's cores, 1e12 takes minutes)")(
      "out", po::value<std::string>(), "the HDF5 file to write (required; replaced)");
  return o;
}

constexpr const char* problem_notes = R"(
One point of a form (each size one value, as bench sweep takes it): the inputs
the harness draws for it, as float64 datasets /inputs/<name> of shape
[B, H, L, d] (every input the form declares: q, k, v, and log_decay, log_gate,
d_o, ... where it has them; a [B, H, L] input as [B, H, L, 1], per-head decay
rates as [H]), and with --reference the fp64 reference's results
/reference/<name> (o; o, dq, dk, dv, ... for a forward+backward form). With
--reference-rows N they are [B, H, N, d], at the rows listed in
/reference_rows (ascending), and the gradients a row sample does not determine
(softmax's and GSA's dk and dv, GSA's dlog_gate) are not written. With
--reference-pairs N they are [1, N, L or rows, d], pair i as head i, the pairs
as /reference_pairs ([N, 2]: batch, head). Root
attributes: format, form, family, variant, seed, git_revision, and each axis
(batch, heads, dk, dv, seq, and the parameters: 0 where the form does not take
one). A runner outside the harness times its implementation on these inputs and
brings its rows back with bench import (README.md, "Peers as rows").
)";

// bench problem replaces a problem file at --out, and nothing else there (a
// result file, anyone's data).
void refuse_replacing_other_than_problem(const std::string& out) {
  std::error_code error;
  if (!std::filesystem::exists(std::filesystem::symlink_status(out, error))) return;
  std::string format;
  if (is_hdf5_file(out)) try {
      format = ResultFile::read_attributes(out)["format"];
    } catch (const std::exception&) {
    }
  if (format != problem_format)
    throw std::invalid_argument("--out '" + out +
                                "' exists and is not a problem file: not replaced (remove it, "
                                "or choose another name)");
}

int problem_command(const std::vector<std::string>& args) {
  const po::options_description options = problem_options();
  po::variables_map vm = parse_command_options(args, options, "problem");
  po::notify(vm);
  if (vm.count("help")) {
    fmt::print("{}\n",
               command_help("bench problem --form F [options] --out P.h5", options, problem_notes));
    return 0;
  }
  if (!vm.count("form"))
    throw std::invalid_argument("--form is required: one form (see bench list)");
  if (!vm.count("out")) throw std::invalid_argument("--out is required: the HDF5 file to write");
  const std::string name = vm["form"].as<std::string>();
  const Form* form = find_form(name);
  if (!form) throw std::invalid_argument("--form: unknown form '" + name + "' (see bench list)");
  // The point as a sweep of one value per axis plans it: the parameters the
  // form does not take at 0, dv following dk.
  Sweep sweep;
  sweep.forms = {form};
  sweep.precisions = {form->precisions().front()};
  read_axes_and_options(vm, sweep);
  for (const SweptAxis& axis : swept_axes()) {
    const std::size_t values = axis.values(sweep).values.size();
    if ((!axis.param || form->takes(*axis.param)) && values != 1)
      throw std::invalid_argument(
          fmt::format("--{}: bench problem takes one value, got {}", axis.name, values));
  }
  const Point point = plan_points(sweep, enabled_backend("host")).front();
  if (const std::string overflow = int_overflow(*form, point.shape, point.params);
      !overflow.empty())
    throw std::invalid_argument(fmt::format("{}: {}", form->name, overflow));
  const bool reference = vm["reference"].as<bool>();
  const double max_bytes = number_option(vm, "max-bytes", 0, true);
  const double bytes = problem_bytes(*form, point.shape, point.params, reference);
  if (bytes > max_bytes)
    throw std::invalid_argument(
        fmt::format("{}: the inputs{} take {:.0f} bytes of float64, above --max-bytes {:.0f}",
                    form->name, reference ? " and reference results" : "", bytes, max_bytes));
  const int reference_rows = vm["reference-rows"].as<int>();
  if (reference_rows < 0 || reference_rows > 4096)
    throw std::invalid_argument(fmt::format("--reference-rows {}: from 0 to 4096", reference_rows));
  if (reference_rows > 0 && !reference)
    throw std::invalid_argument("--reference-rows: rows of the reference, with --reference only");
  const int reference_pairs = vm["reference-pairs"].as<int>();
  const std::int64_t pairs = std::int64_t(point.shape.batch) * point.shape.heads;
  const std::int64_t most_pairs = std::min<std::int64_t>(2, pairs);  // first_and_last's
  if (reference_pairs < 0 || reference_pairs > most_pairs)
    throw std::invalid_argument(
        fmt::format("--reference-pairs {}: from 0 to {} (batch x heads is {})", reference_pairs,
                    most_pairs, pairs));
  if (reference_pairs > 0 && !reference)
    throw std::invalid_argument("--reference-pairs: pairs of the reference, with --reference only");
  const HeadList checked_pairs =
      reference_pairs > 0 ? first_and_last(point.shape, reference_pairs) : HeadList{};
  const ref::RowList rows = reference_rows > 0
                                ? sample_rows(point.shape.seq, reference_rows,
                                              row_boundary(point.params), seed_option(vm))
                                : ref::RowList{};
  // A sampled row costs at most twice a pair's mean row (error_check.hpp).
  const double head_flops = form->cost(point.shape, point.params, sizeof(double)).reference_flops;
  const double reference_flops =
      (rows.empty() ? head_flops : 2 * head_flops / point.shape.seq * double(rows.size())) *
      double(reference_pairs > 0 ? reference_pairs : pairs);
  const double max_flops = number_option(vm, "max-reference-flops", 0, true);
  if (reference && reference_flops > max_flops)
    throw std::invalid_argument(
        fmt::format("{}: its fp64 reference costs {:.3g} FLOPs, above --max-reference-flops {:.3g}",
                    form->name, reference_flops, max_flops));
  const std::string out = vm["out"].as<std::string>();
  refuse_replacing_other_than_problem(out);
  default_openmp_placement();
  Kokkos::ScopeGuard kokkos;
  write_problem_file(out, *form, point.shape, point.params, seed_option(vm), reference, rows,
                     checked_pairs, point.planned.axes);
  std::vector<std::string> sizes;  // the point's axes, those the form takes
  for (const auto& [axis, value] : point.planned.axes)
    if (value) sizes.push_back(fmt::format("{}={}", axis, value));
  fmt::print("problem: {} {}{} written to {}\n", form->name, fmt::join(sizes, " "),
             point.planned.variant.empty() ? "" : " [" + point.planned.variant + "]", out);
  return 0;
}

po::options_description cases_options() {
  po::options_description o("cases options");
  o.add_options()("help,h", "this help")("form", po::value<std::string>(),
                                         "the form (see bench list); required")(
      "precision", po::value<std::string>()->default_value("float"),
      "the precision whose tolerance the files carry: float, double, tf32 or bf16")(
      "seed", po::value<std::string>()->default_value("2024"), "seed of the random cases' inputs")(
      "vectors", po::value<std::string>(),
      "the independent test vectors (default: $ATTN_TESTDATA, else the checkout's "
      "tests/data/vectors.h5); none: no vector cases")(
      "out", po::value<std::string>(),
      "the folder to write the case files into (required; created; the case files it holds "
      "are replaced, and it may hold nothing else)");
  for (const OptionSpec& option : declared_options()) add_declared_option(o, option);
  return o;
}

constexpr const char* cases_notes = R"(
The form's conformance set, the cases the equivalence suite holds our kernels
to (harness/conformance.hpp), one problem file each, DIR/NN-NAME.h5 in order:
the independent vectors of tests/data/ the form reproduces (vectors-GROUP;
their own results where they have them), the edge shapes every form runs at
on random inputs (edge-N), and the family's numerically hostile inputs
(gates-*, decay-*, scores-*). Each file is a bench problem file with
/inputs/<name> and /reference/<name> (every result the form declares:
gradients too for a forward+backward form) and, beside bench problem's root
attributes, the text attributes case, source, precision, rel_l2_tolerance,
max_abs_tolerance (relative to the largest result value when above 1),
conditioning (a factor on both tolerances), judge (own-norm, or largest:
gradients within max abs of the largest value of all results) and options (a
JSON object of the form's options). A family option given here (e.g.
--mask-convention B) holds for every case, and only the vectors of that option
set are written. bench verify (docs/verify.md) runs an implementation on them.
)";

// A precision's tolerances by name; throws std::invalid_argument for another word.
std::pair<double, double> tolerances_of(const std::string& precision) {
  std::pair<double, double> found{0, 0};
  for_each_precision([&](auto* tag) {
    using P = std::remove_pointer_t<decltype(tag)>;
    if (precision == precision_name<P>())
      found = {precision_traits<P>::rel_l2_tolerance, precision_traits<P>::max_abs_tolerance};
  });
  if (!found.first)
    throw std::invalid_argument("--precision '" + precision +
                                "': one of float, double, tf32, bf16");
  return found;
}

// The options of a form as a JSON object: {"mask-convention": "A"}.
std::string options_json(const Form& form, const FormParams& params) {
  std::vector<std::string> fields;
  for (const OptionSpec& option : form.options)
    fields.push_back(
        fmt::format("\"{}\": \"{}\"", option.name, option_text(params.options.get(option.name))));
  return "{" + fmt::format("{}", fmt::join(fields, ", ")) + "}";
}

// The case files a folder may hold: NN-NAME.h5 problem files, removed before
// the new set is written (a set of fewer cases leaves none of an older one);
// anything else there is refused, so that bench cases replaces no one's data.
void clear_case_folder(const std::string& out) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::exists(out, error)) return;
  if (!fs::is_directory(out, error))
    throw std::invalid_argument("--out '" + out + "' exists and is not a folder");
  for (const auto& entry : fs::directory_iterator(out, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".h5")
      throw std::invalid_argument("--out '" + out + "' holds '" + name +
                                  "', not a case file: not written (choose an empty folder)");
    refuse_replacing_other_than_problem(entry.path().string());
  }
  for (const auto& entry : fs::directory_iterator(out, error)) fs::remove(entry.path(), error);
}

int cases_command(const std::vector<std::string>& args) {
  const po::options_description options = cases_options();
  po::variables_map vm = parse_command_options(args, options, "cases");
  po::notify(vm);
  if (vm.count("help")) {
    fmt::print("{}\n", command_help("bench cases --form F [--precision P] --out DIR", options,
                                    cases_notes));
    return 0;
  }
  if (!vm.count("form"))
    throw std::invalid_argument("--form is required: one form (see bench list)");
  if (!vm.count("out")) throw std::invalid_argument("--out is required: the folder to write");
  const std::string name = vm["form"].as<std::string>();
  const Form* form = find_form(name);
  if (!form) throw std::invalid_argument("--form: unknown form '" + name + "' (see bench list)");
  const std::string precision = vm["precision"].as<std::string>();
  const auto [rel_l2, max_abs] = tolerances_of(precision);
  const std::uint64_t seed = seed_option(vm);
  OptionValues chosen;
  bool options_given = false;
  for (const OptionSpec& option : form->options) {
    chosen.set(option.name, declared_option_value(vm, option));
    options_given = options_given || !vm[option.name].defaulted();
  }
  const std::string vectors = !vm.count("vectors") ? default_vectors_path()
                              : vm["vectors"].as<std::string>() == "none"
                                  ? ""
                                  : vm["vectors"].as<std::string>();
  const std::string out = vm["out"].as<std::string>();
  clear_case_folder(out);
  default_openmp_placement();
  Kokkos::ScopeGuard kokkos;
  const std::vector<ConformanceCase> cases =
      conformance_cases(*form, seed, vectors, options_given ? &chosen : nullptr);
  std::error_code error;
  std::filesystem::create_directories(out, error);
  if (error) throw std::invalid_argument("--out '" + out + "': " + error.message());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const ConformanceCase& c = cases[i];
    const Shape shape{c.problem.q.batch, c.problem.q.heads, c.problem.q.seq, c.problem.q.dim,
                      c.problem.v.dim};
    AxisValues axes = {{"batch", shape.batch},
                       {"heads", shape.heads},
                       {"dk", shape.dk},
                       {"dv", shape.dv},
                       {"seq", shape.seq},
                       {"chunk", c.params.axis("chunk")},
                       {"slots", c.params.axis("slots")}};
    const std::map<std::string, std::string> text = {
        {"case", c.name},
        {"source", c.source},
        {"seed", std::to_string(seed)},
        {"precision", precision},
        {"rel_l2_tolerance", fmt::format("{:g}", rel_l2)},
        {"max_abs_tolerance", fmt::format("{:g}", max_abs)},
        {"conditioning", fmt::format("{:g}", c.conditioning)},
        {"judge", c.gradients_by_largest ? "largest" : "own-norm"},
        {"options", options_json(*form, c.params)}};
    write_case_file(fmt::format("{}/{:02}-{}.h5", out, i, c.name), *form, c.problem, c.params,
                    c.reference, text, axes);
  }
  fmt::print("cases: {} cases of {} in {} written to {}\n", cases.size(), form->name, precision,
             out);
  return 0;
}

// bench verify: the Python runner (experiments/verify) in this process's
// place, told to write its cases with this bench; it prints its own help.
int verify_command(int argc, char* argv[]) {
  const std::string runner = verify_runner_path();
  if (runner.empty())
    throw std::invalid_argument(
        "verify: no runner: the checkout this bench was built in is gone and none is beside it "
        "(set ATTN_VERIFY_RUNNER to a checkout's experiments/verify)");
  std::error_code error;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", error).string();
  std::vector<std::string> words = {runner};
  if (!self.empty()) words.insert(words.end(), {"--bench", self});
  words.insert(words.end(), argv + 2, argv + argc);
  std::vector<char*> pointers;
  for (std::string& word : words) pointers.push_back(word.data());
  pointers.push_back(nullptr);
  std::fflush(stdout);
  execv(runner.c_str(), pointers.data());
  throw std::invalid_argument(
      fmt::format("verify: cannot run its runner '{}': {}", runner, std::strerror(errno)));
}

constexpr const char* import_notes = R"(
Appends rows measured outside the harness (a peers runner timing another
implementation on bench problem's inputs) to a result file. Each line of
ROWS.jsonl is a JSON object with a result row's fields: form, backend,
precision and status (ok, oom, timeout or error) required; family, note,
variant, revision (strings), axes (an object: axis name -> whole number; the
file's axis columns only), reps, iterations, err_heads, peak_bytes (whole
numbers), time_median_s, time_min_s, time_max_s, time_mean_s, time_stddev_s,
max_abs_err, rel_l2_err (numbers), samples (an array of seconds) optional, 0 or
"" when left out. A row of a registered form whose axes are a shape of it gets
flops and bytes from the form's cost model, and when ok gflops and gbps at its
median time, as a sweep's row. A row whose point (form, variant, backend,
precision, axes) the file holds replaces that row; others are appended. Every
line is checked before anything is written: a bad line is an error naming it,
and the file is left as it was. A missing FILE.h5 is created with this build's
provenance; each import adds a line to its `imported` attribute.
)";

int import_command(const std::vector<std::string>& args, const std::string& command_line) {
  po::options_description options("import options");
  options.add_options()("help,h", "this help");
  const auto [vm, files] = parse_options_and_files(args, options);
  if (vm.count("help")) {
    fmt::print("{}\n", command_help("bench import FILE.h5 ROWS.jsonl", options, import_notes));
    return 0;
  }
  if (files.size() != 2)
    throw std::invalid_argument(
        "import needs a result file and a rows file: bench import FILE.h5 ROWS.jsonl");
  const std::vector<ResultRow> rows = read_row_lines(files[1], axis_columns());
  if (rows.empty()) {  // nothing to record: the file is not opened (each import adds a line)
    fmt::print("import: no rows in {}; {} left as it was\n", printable(files[1]),
               printable(files[0]));
    return 0;
  }
  default_openmp_placement();
  Kokkos::ScopeGuard kokkos;  // a new file's provenance reads the OpenMP threads and the device
  std::map<std::string, std::string> attributes;
  if (!std::filesystem::exists(files[0])) {
    std::set<std::string> backends;
    for (const ResultRow& row : rows) backends.insert(row.backend);
    attributes = file_provenance(fmt::format("{}", fmt::join(backends, ",")), command_line);
  }
  const ImportCounts counts = import_rows(files[0], rows, attributes, command_line);
  fmt::print("import: {} rows appended, {} replaced in {}\n", counts.appended, counts.replaced,
             files[0]);
  return 0;
}

// bench sweep and bench run (`command`, its options from argv[2] on, or
// argv[3] on after run's experiment file): the sweep they describe, listed
// (--list-points), planned (--dry-run) or measured. Returns the exit status.
int sweep_command(const std::string& command, int argc, char* argv[],
                  const std::string& command_line, bool help_asked) {
  const auto options = sweep_options();
  const std::string usage =
      command == "run" ? "bench run FILE.cfg [options]" : "bench sweep [options]";
  if (help_asked) {
    const std::string what = command == "run"
                                 ? "\nA sweep whose options are read from FILE (name = value "
                                   "lines, # comments, the names\n"
                                   "of the options below); options on the command line win.\n"
                                 : "\nMeasures forms over a grid of shapes into an HDF5 file.\n";
    fmt::print("{}\n", command_help(usage, options, what + sweep_notes));
    return 0;
  }
#ifdef ATTN_MPI
  const distributed::Session mpi(argc, argv);  // one rank of several under mpirun or srun
#endif
  int first = 2;
  std::string config_file;
  if (command == "run") {
    if (argc < 3 || argv[2][0] == '-')
      throw std::invalid_argument("run needs an experiment file: bench run FILE.cfg");
    config_file = argv[2];
    first = 3;
  }
  // A stray word (`sweep garbage`, `--decay-floor 0`) is an error, not ignored.
  po::variables_map vm =
      parse_command_options(std::vector<std::string>(argv + first, argv + argc), options, command);
  if (vm.count("help")) {  // after other words: bench run FILE.cfg --help
    fmt::print("{}\n", command_help(usage, options, sweep_notes));
    return 0;
  }
  SetIn set_in_file;
  const std::string config_text =
      config_file.empty() ? "" : store_experiment_file(config_file, options, vm, set_in_file);
  po::notify(vm);
  Sweep sweep;
  try {
    sweep = sweep_from(vm, command_line);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(located(e.what(), set_in_file));
  }
  sweep.config_file = config_file;
  sweep.config_text = config_text;
  if (vm["list-points"].as<bool>()) {
    print_point_list(sweep);
    return 0;
  }
  if (sweep.dry_run)
    return run_sweep(sweep);  // plans and reads --out only: no Kokkos, no Google Benchmark
  int benchmark_argc = 1;     // its flags at their defaults: bench's options set what it runs
  benchmark::Initialize(&benchmark_argc, argv);
  default_openmp_placement();
#ifdef ATTN_MPI
  Kokkos::ScopeGuard kokkos(
      distributed::kokkos_arguments());  // this rank's GPU or share of the cores
#else
  Kokkos::ScopeGuard kokkos;
#endif
  memory::install_hooks();
  return run_sweep(sweep);
}

}  // namespace

int run_command(int argc, char* argv[]) {
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);
  const std::string command = argc > 1 ? argv[1] : "";
  if (command.empty() || command == "-h" || command == "--help" || command == "help") {
    fmt::print("{}\n", overview);
    return command.empty() ? 2 : 0;
  }
  const bool help_asked =
      argc > 2 && (std::string(argv[2]) == "--help" || std::string(argv[2]) == "-h");
  try {
    if (command == "--version") {
      if (argc > 2)
        throw std::invalid_argument(fmt::format("--version takes no arguments, got '{}'", argv[2]));
      fmt::print("bench {}\n", version_line());
      return 0;
    }
    if (command == "list") return list_command(std::vector<std::string>(argv + 2, argv + argc));
    if (command == "export") return export_command(std::vector<std::string>(argv + 2, argv + argc));
    if (command == "problem")
      return problem_command(std::vector<std::string>(argv + 2, argv + argc));
    if (command == "verify") return verify_command(argc, argv);
    if (command == "cases") return cases_command(std::vector<std::string>(argv + 2, argv + argc));
    if (command == "import")
      return import_command(std::vector<std::string>(argv + 2, argv + argc), command_line);
    if (command == "compare")
      return compare_command(std::vector<std::string>(argv + 2, argv + argc));
    if (command == "ceiling") {
      if (help_asked) {
        fmt::print(
            "usage: bench ceiling\n\nThis CPU's fp32 FMA and copy ceilings, on the OpenMP threads "
            "(about a "
            "second);\na sweep on the host records them for the roofline. No options.\n");
        return 0;
      }
      if (argc > 2)
        throw std::invalid_argument(fmt::format("ceiling takes no arguments, got '{}'", argv[2]));
      default_openmp_placement();
      const HostCeilings c = measure_host_ceilings();
      fmt::print(
          "fp32 FMA {:.1f} GFLOP/s, copy {:.1f} GB/s (read + write), {} OpenMP threads, {} "
          "vectors\n",
          c.fma_gflops, c.copy_gbps, c.threads, host_vectors::isa);
      return 0;
    }
    if (command != "sweep" && command != "run")
      throw std::invalid_argument("unknown command '" + command +
                                  "' (expected list, sweep, run, compare, export, problem, cases, "
                                  "verify, import, ceiling or --version)");
    return sweep_command(command, argc, argv, command_line, help_asked);
  } catch (const po::error& e) {  // messages quote the user's input: printed escaped (text.hpp)
    fmt::print(stderr, "bench: {} (see bench --help)\n", printable(e.what()));
    return 2;
  } catch (const std::invalid_argument& e) {
#ifdef ATTN_MPI
    if (distributed::rank() != 0)
      return 2;  // every rank checks the same input: rank 0 says what is wrong
#endif
    fmt::print(stderr, "bench: {}\n", printable(e.what()));
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench: error: {}\n", printable(e.what()));
    return 1;
  }
}

// A failed write to standard output (a full disk, /dev/full) is an error: fmt
// throws only when stdio's buffer fills, so a short output fails at the flush.
int main(int argc, char* argv[]) {
  // Past a file size limit (ulimit -f) a write then fails with EFBIG, which the
  // result file reports in one line with every finished row kept, instead of
  // SIGXFSZ ending bench with no word.
  std::signal(SIGXFSZ, SIG_IGN);
  const int status = run_command(argc, argv);
  if ((std::fflush(stdout) != 0 || std::ferror(stdout)) && status == 0) {
    fmt::print(stderr, "bench: writing to standard output failed: {}\n", std::strerror(errno));
    return 1;
  }
  return status;
}
