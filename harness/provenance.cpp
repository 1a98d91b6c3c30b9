#include "provenance.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <Kokkos_Core.hpp>

#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <vector>

#include "build_info.hpp"
#include "git_revision.hpp"

namespace attn {
namespace {

// "NVIDIA H100 80GB HBM3" from Kokkos's line of the selected GPU
// ("Kokkos::Cuda[ 0 ] NAME capability 9.0, ... : Selected"), else the CPU model.
std::string device_name(const std::string& backend) {
  if (backend == "cuda") {
    std::istringstream lines(kokkos_configuration());
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

std::string environment_variable(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "unset";
}

#ifdef KOKKOS_ENABLE_CUDA
// CUDA's version numbers (1000 * major + 10 * minor) as "13.0".
std::string cuda_version(int version) {
  return fmt::format("{}.{}", version / 1000, version % 1000 / 10);
}
#endif

}  // namespace

std::map<std::string, std::string> build_provenance() {
  std::vector<std::string> backends;
#ifdef KOKKOS_ENABLE_SERIAL
  backends.push_back("Serial");
#endif
#ifdef KOKKOS_ENABLE_OPENMP
  backends.push_back("OpenMP");
#endif
#ifdef KOKKOS_ENABLE_CUDA
  backends.push_back("Cuda");
#endif
  return {{"git_revision", ATTN_GIT_REVISION},
          {"git_dirty", ATTN_GIT_DIRTY},
          {"build_type", ATTN_BUILD_TYPE},
          {"compiler", ATTN_COMPILER},
          {"compiler_flags", ATTN_COMPILER_FLAGS},
          {"kokkos_version", fmt::format("{}.{}.{}", KOKKOS_VERSION / 10000,
                                         KOKKOS_VERSION / 100 % 100, KOKKOS_VERSION % 100)},
          {"kokkos_backends", fmt::format("{}", fmt::join(backends, ","))}};
}

std::string version_line() {
  const std::string dirty = ATTN_GIT_DIRTY;
  return fmt::format("{} ({}), {} build", ATTN_GIT_REVISION,
                     dirty == "yes"  ? "dirty tree"
                     : dirty == "no" ? "clean tree"
                                     : "tree state unknown",
                     ATTN_BUILD_TYPE);
}

std::string kokkos_configuration() {
  std::ostringstream out;
  Kokkos::print_configuration(out, true);
  return out.str();
}

std::map<std::string, std::string> run_environment(const std::string& backend) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::map<std::string, std::string> environment{
      {"device", device_name(backend)},
      {"host", host[0] ? host : "unknown"},
      {"openmp_threads", std::to_string(Kokkos::DefaultHostExecutionSpace().concurrency())},
      {"omp_proc_bind", environment_variable("OMP_PROC_BIND")},
      {"omp_places", environment_variable("OMP_PLACES")}};
#ifdef KOKKOS_ENABLE_CUDA
  int runtime = 0, driver = 0;
  environment["cuda_runtime"] =
      cudaRuntimeGetVersion(&runtime) == cudaSuccess ? cuda_version(runtime) : "unknown";
  environment["cuda_driver"] =
      cudaDriverGetVersion(&driver) == cudaSuccess ? cuda_version(driver) : "unknown";
#endif
  return environment;
}

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::map<std::string, std::string> file_provenance(const std::string& backend,
                                                   const std::string& command_line) {
  std::map<std::string, std::string> attributes = build_provenance();
  attributes.merge(run_environment(backend));
  attributes.insert({{"backend", backend},
                     {"date", now_iso8601()},
                     {"command_line", command_line},
                     {"kokkos_configuration", kokkos_configuration()}});
  return attributes;
}

}  // namespace attn
