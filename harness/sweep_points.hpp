// A sweep's points without measuring them, for a runner outside the harness
// (bench sweep --list-points): it times the same points its own way and
// brings the rows back with bench import.
#pragma once
#include <string>

#include "sweep_config.hpp"

namespace attn {

// The name of the enabled backend that --backend `wanted` names ("host": the
// host backend's); throws std::invalid_argument when none is. Defined in sweep.cpp.
std::string enabled_backend(const std::string& wanted);

// Prints each planned point of the sweep as one JSON object a line: form,
// family, precision, backend, variant, options (each option the form declares:
// name -> its value as text) and axes (every axis column: name -> value, 0
// where not a parameter of the form) and err_rows (the rows bench's error
// check compares in each checked pair at --check-flops and --check-rows: seq
// for whole pairs, fewer for sampled rows, 0 for none), in the sweep's
// order. Reads and writes no file.
void print_point_list(const Sweep& sweep);

}  // namespace attn
