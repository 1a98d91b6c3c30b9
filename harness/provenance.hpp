// Where a measurement comes from, for the attributes of result files and
// bench --version: the build (git revision and whether the tree was dirty,
// build type, compiler and flags, Kokkos; fixed when it was compiled) and the
// run's machine (device, host, CUDA runtime and driver, OpenMP settings).
#pragma once
#include <map>
#include <string>

namespace attn {

// git_revision, git_dirty ("yes", "no", or "unknown" outside a git checkout),
// build_type, compiler, compiler_flags, kokkos_version, kokkos_backends.
std::map<std::string, std::string> build_provenance();

// "3e2e9e1e2b03-dirty (dirty tree), Release build"
std::string version_line();

// Kokkos's own description of its configuration (print_configuration, verbose).
std::string kokkos_configuration();

// After Kokkos has started: device (the GPU for backend "cuda", else the CPU
// model), host, openmp_threads, omp_proc_bind, omp_places ("unset" when not
// set), and on a CUDA build cuda_runtime and cuda_driver.
std::map<std::string, std::string> run_environment(const std::string& backend);

// A new result file's attributes that do not depend on how its rows were
// measured: build_provenance, run_environment(backend), backend, date,
// command_line and kokkos_configuration. A sweep adds its measurement
// settings; bench import writes these alone. After Kokkos has started.
std::map<std::string, std::string> file_provenance(const std::string& backend,
                                                   const std::string& command_line);

// The time now in UTC, "2026-11-25T04:30:00Z": a run's date and a resumption's.
std::string now_iso8601();

}  // namespace attn
