// Running a sweep (bench sweep / bench run). sweep.cpp drives the parts, each
// in its own file: plan.hpp (the grid of points, skipping larger L after a
// timeout or out-of-memory, predicted times), resume.hpp (the result file's
// resumption), console.hpp (table rows, the progress line with its ETA, the
// summary, the --dry-run plan), signals.hpp (Ctrl-C), measure.hpp (one point).
#pragma once
#include "sweep_config.hpp"

namespace attn {

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
