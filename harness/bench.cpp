// bench: list the attention forms, and sweep them over shapes, timing each
// point, measuring its peak memory and its error against the fp64 reference,
// into an HDF5 table. `bench --help` explains.
#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <boost/program_options.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>

#include "axes.hpp"
#include "backends.hpp"
#include "git_revision.hpp"
#include "inputs.hpp"
#include "measure.hpp"
#include "memory.hpp"
#include "registry.hpp"

namespace po = boost::program_options;
using namespace attn;

namespace {

constexpr const char* usage = R"(usage:
  bench list                      every form, its family, parameters and description
  bench sweep [options]           measure forms over a grid of shapes into an HDF5 file
  bench run FILE.cfg [options]    a sweep whose options are read from FILE (key = value
                                  lines, same names as below); the command line wins

Sizes take lists and power-of-two ranges: 1k..128k = 1024, 2048, ..., 131072;
1k,3k,5000 = 1024, 3072, 5000 (k = 1024). Every combination is one point; a
parameter a form does not take (e.g. --chunk for softmax/full) is not swept for it.
)";

po::options_description sweep_options() {
  po::options_description o("sweep options");
  o.add_options()
    ("help,h", "this help")
    ("forms", po::value<std::string>()->default_value("all"), "forms or families, comma-separated (see bench list), or all")
    ("seq", po::value<std::string>()->default_value("1k..16k"), "sequence lengths L")
    ("batch", po::value<std::string>()->default_value("1"), "batch sizes B")
    ("heads", po::value<std::string>()->default_value("8"), "head counts H")
    ("dk", po::value<std::string>()->default_value("64"), "query/key head sizes")
    ("dv", po::value<std::string>(), "value head sizes (default: equal to dk)")
    ("chunk", po::value<std::string>()->default_value("64"), "chunk sizes, for chunked forms (a chunk >= L is one chunk)")
    ("slots", po::value<std::string>()->default_value("64"), "GSA memory slots per head m, for slotted forms")
    ("gate-temperature", po::value<double>()->default_value(8), "GSA: forget gates alpha = sigmoid(z)^(1/tau), z ~ N(0,1); tau (spec/gsa.md 3.7)")
    ("mask-convention", po::value<std::string>()->default_value("A"), "Lion-s mask convention (spec/lion.md 2.3): A (the paper's Eq. 17) or B (the released code)")
    ("unscaled", po::bool_switch(), "LION: the non-scaled form (QK^T . M)V instead of Scale(QK^T . M)V")
    ("decay-schedule", po::value<std::string>()->default_value("alibi"), "Lightning's per-head decay: alibi (released code, s_h = 2^(-8h/H)) or paper (Eq. 10, s_h = 8h/H)")
    ("decay-floor", po::bool_switch(), "Lion-s: draw log-decays as ln(sigmoid(z) + 1e-7), the released code's floor")
    ("precision", po::value<std::string>()->default_value("float"), "float, double or float,double")
    ("backend", po::value<std::string>(), "execution space: host, cuda (default: cuda when built with it, else host)")
    ("seed", po::value<std::uint64_t>()->default_value(2024), "seed of the random inputs")
    ("reps", po::value<int>()->default_value(10), "timed runs per point (median, min, max reported)")
    ("warmup", po::value<int>()->default_value(1), "untimed runs before timing")
    ("check-flops", po::value<double>()->default_value(2e10), "largest fp64 reference cost (FLOPs) spent on the error check of a point")
    ("out", po::value<std::string>(), "output HDF5 file (required)");
  return o;
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
    if (!matched) throw std::invalid_argument("--forms: unknown form '" + word + "' (see bench list)");
  }
  return chosen;
}

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string kokkos_configuration() {
  std::ostringstream out;
  Kokkos::print_configuration(out, true);
  return out.str();
}

// "NVIDIA H100 80GB HBM3" from Kokkos's device line of the selected GPU
// ("Kokkos::Cuda[ 0 ] NAME capability 9.0, ... : Selected"), else the CPU model.
std::string device_name(const std::string& backend, const std::string& config) {
  if (backend == "cuda") {
    std::istringstream lines(config);
    for (std::string line; std::getline(lines, line);) {
      const auto name = line.find("] "), capability = line.find(" capability");
      if (line.rfind("Kokkos::Cuda[", 0) == 0 && line.find("Selected") != std::string::npos &&
          name != std::string::npos && capability != std::string::npos && capability > name)
        return line.substr(name + 2, capability - name - 2);
    }
  }
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

struct Sweep {
  std::vector<const Form*> forms;
  std::vector<std::string> precisions;
  Axis batch, heads, dk, dv, seq, chunk, slots;
  bool dv_follows_dk;
  FormParams params;  // the options that are not swept
  MeasureOptions measure;
  std::string out;
};

template <class Exec>
void run_sweep(const Sweep& sweep, const std::string& command_line) {
  const std::string backend = backend_name<Exec>();
  const std::string config = kokkos_configuration();
  ResultFile file(sweep.out, {{"backend", backend},
                              {"device", device_name(backend, config)},
                              {"precision", fmt::format("{}", fmt::join(sweep.precisions, ","))},
                              {"git_revision", ATTN_GIT_REVISION},
                              {"date", now_iso8601()},
                              {"command_line", command_line},
                              {"kokkos_configuration", config},
                              {"format", "attn-harness points v3"}});
  std::vector<ResultRow> rows;
  fmt::print("{:<26} {:>4} {:>7} {:>5} {:>5} {:>6} {:>5} {:>7} {:>11} {:>10} {:>9} {:>8} {:>9}\n", "form", "prec",
             "L", "dk", "dv", "chunk", "slots", "status", "median ms", "peak MiB", "GFLOP/s", "GB/s", "rel err");
  for (const auto& precision : sweep.precisions) {
    for (const Form* form : sweep.forms) {
      const bool chunked = form->takes(Param::chunk), slotted = form->takes(Param::slots);
      if (!chunked && sweep.chunk.values.size() > 1)
        fmt::print("note: {} takes no chunk size; --chunk is not swept for it\n", form->name);
      if (!slotted && sweep.slots.values.size() > 1)
        fmt::print("note: {} has no slots; --slots is not swept for it\n", form->name);
      for (long long B : sweep.batch.values) for (long long H : sweep.heads.values)
      for (long long dk : sweep.dk.values) for (long long dvv : sweep.dv.values)
      for (long long L : sweep.seq.values) for (long long C : sweep.chunk.values)
      for (long long m : sweep.slots.values) {
        if (!chunked && C != sweep.chunk.values.front()) continue;
        if (!slotted && m != sweep.slots.values.front()) continue;
        const long long dv = sweep.dv_follows_dk ? dk : dvv;
        if (sweep.dv_follows_dk && dvv != sweep.dv.values.front()) continue;
        const Shape shape{int(B), int(H), int(L), int(dk), int(dv)};
        FormParams params = sweep.params;
        params.chunk = chunked ? int(C) : 0;
        params.slots = slotted ? int(m) : 0;
        ResultRow row = precision == "float" ? measure_point<Exec, float>(*form, shape, params, sweep.measure)
                                             : measure_point<Exec, double>(*form, shape, params, sweep.measure);
        file.append(row);
        fmt::print("{:<26} {:>4} {:>7} {:>5} {:>5} {:>6} {:>5} {:>7} {:>11.3f} {:>10.1f} {:>9.1f} {:>8.1f} {:>9}{}\n",
                   row.form, row.precision == "float" ? "f32" : "f64", row.seq, row.dk, row.dv,
                   row.chunk ? std::to_string(row.chunk) : "-", row.slots ? std::to_string(row.slots) : "-",
                   row.status, row.time_median_s * 1e3,
                   row.peak_bytes / 1048576.0, row.gflops, row.gbps,
                   row.err_heads ? fmt::format("{:.1e}", row.rel_l2_err) : "-",
                   row.note.empty() ? "" : "  (" + row.note + ")");
        std::fflush(stdout);
        rows.push_back(row);
      }
    }
  }
  int ok = 0;
  for (const auto& r : rows) ok += r.status == "ok";
  fmt::print("{} points, {} ok, {} not ok; written to {}\n", rows.size(), ok, rows.size() - ok, sweep.out);
}

template <class... Exec>
void dispatch_backend(const std::string& wanted, const Sweep& sweep, const std::string& command_line,
                      std::tuple<Exec...>*) {
  bool done = false;
  std::vector<std::string> names;
  auto try_one = [&](auto* tag) {
    using E = std::remove_pointer_t<decltype(tag)>;
    const std::string name = backend_name<E>();
    names.push_back(name);
    const bool is_host = std::is_same_v<E, HostBackend>;
    if (done || !(wanted == name || (wanted == "host" && is_host))) return;
    done = true;
    run_sweep<E>(sweep, command_line);
  };
  (try_one(static_cast<Exec*>(nullptr)), ...);
  if (!done)
    throw std::invalid_argument(fmt::format("--backend '{}' is not enabled in this build (enabled: host, {})",
                                            wanted, fmt::join(names, ", ")));
}

int sweep_command(const po::variables_map& vm, const std::string& command_line) {
  if (!vm.count("out")) throw std::invalid_argument("--out is required: the HDF5 file to write");
  Sweep sweep;
  sweep.forms = select_forms(vm["forms"].as<std::string>());
  sweep.precisions = split_list("precision", vm["precision"].as<std::string>());
  for (const auto& p : sweep.precisions)
    if (p != "float" && p != "double")
      throw std::invalid_argument("--precision: '" + p + "' is neither float nor double");
  sweep.seq = parse_axis("seq", vm["seq"].as<std::string>());
  sweep.batch = parse_axis("batch", vm["batch"].as<std::string>());
  sweep.heads = parse_axis("heads", vm["heads"].as<std::string>());
  sweep.dk = parse_axis("dk", vm["dk"].as<std::string>());
  sweep.dv_follows_dk = !vm.count("dv");
  sweep.dv = sweep.dv_follows_dk ? Axis{"dv", {0}} : parse_axis("dv", vm["dv"].as<std::string>());
  sweep.chunk = parse_axis("chunk", vm["chunk"].as<std::string>());
  sweep.slots = parse_axis("slots", vm["slots"].as<std::string>());
  sweep.measure.inputs.gate_temperature = vm["gate-temperature"].as<double>();
  if (!(sweep.measure.inputs.gate_temperature > 0))
    throw std::invalid_argument("--gate-temperature must be positive");
  const std::string convention = vm["mask-convention"].as<std::string>();
  if (convention != "A" && convention != "B")
    throw std::invalid_argument("--mask-convention: '" + convention + "' is neither A nor B");
  sweep.params.mask_convention = convention[0];
  sweep.params.scaled = !vm["unscaled"].as<bool>();
  sweep.measure.inputs.decay_schedule = vm["decay-schedule"].as<std::string>();
  lightning_decay_rates(1, sweep.measure.inputs.decay_schedule);  // refuses an unknown schedule up front
  sweep.measure.inputs.decay_floor = vm["decay-floor"].as<bool>();
  sweep.measure.seed = vm["seed"].as<std::uint64_t>();
  sweep.measure.reps = vm["reps"].as<int>();
  sweep.measure.warmup = vm["warmup"].as<int>();
  sweep.measure.check_flops = vm["check-flops"].as<double>();
  if (sweep.measure.reps < 1) throw std::invalid_argument("--reps must be at least 1");
  if (sweep.measure.warmup < 0) throw std::invalid_argument("--warmup must not be negative");
  sweep.out = vm["out"].as<std::string>();
#ifdef KOKKOS_ENABLE_CUDA
  const std::string default_backend = "cuda";
#else
  const std::string default_backend = "host";
#endif
  const std::string backend = vm.count("backend") ? vm["backend"].as<std::string>() : default_backend;
  dispatch_backend(backend, sweep, command_line, static_cast<Backends*>(nullptr));
  return 0;
}

int list_command() {
  fmt::print("{:<26} {:<10} {:<7} {:<22} {}\n", "form", "family", "causal", "params", "description");
  for (const auto& f : forms()) {
    std::string params;
    for (auto p : f.params) params += (params.empty() ? "" : ",") + std::string(param_name(p));
    fmt::print("{:<26} {:<10} {:<7} {:<22} {}\n", f.name, f.family, f.causal ? "yes" : "no",
               params.empty() ? "-" : params, f.description);
  }
  return 0;
}

}  // namespace

int main(int argc, char* argv[]) {
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);
  const auto options = sweep_options();
  const std::string command = argc > 1 ? argv[1] : "";
  if (command.empty() || command == "-h" || command == "--help" || command == "help") {
    std::cout << usage << '\n' << options << '\n';
    return command.empty() ? 2 : 0;
  }
  try {
    if (command == "list") return list_command();
    if (command != "sweep" && command != "run")
      throw std::invalid_argument("unknown command '" + command + "' (expected list, sweep or run)");
    int first = 2;
    std::string config_file;
    if (command == "run") {
      if (argc < 3 || argv[2][0] == '-') throw std::invalid_argument("run needs an experiment file: bench run FILE.cfg");
      config_file = argv[2];
      first = 3;
    }
    std::vector<std::string> args(argv + first, argv + argc);
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(options).run(), vm);
    if (vm.count("help")) {
      std::cout << usage << '\n' << options << '\n';
      return 0;
    }
    if (!config_file.empty()) {
      std::ifstream in(config_file);
      if (!in) throw std::invalid_argument("cannot read experiment file '" + config_file + "'");
      po::store(po::parse_config_file(in, options), vm);
    }
    po::notify(vm);
    Kokkos::ScopeGuard kokkos;
    memory::install_hooks();
    return sweep_command(vm, command_line);
  } catch (const po::error& e) {
    std::fprintf(stderr, "bench: %s (see bench --help)\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "bench: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench: error: %s\n", e.what());
    return 1;
  }
}
