// What a sweep prints: table rows with a progress line under them, the
// summary at the end, the plan of --dry-run, and the notes and hints around them.
#pragma once
#include <string>
#include <vector>

#include "plan.hpp"
#include "results_file.hpp"
#include "sweep_config.hpp"

namespace attn {

// "42.1s", "3m07s", "2h05m"; "?" for a time not known (NaN).
std::string duration_text(double seconds);

// Table rows on stdout with a progress line under them: rewritten in place on
// a terminal, one plain line per point otherwise (logs, pipes).
class Console {
 public:
  Console();  // a terminal when standard output is one
  explicit Console(bool terminal);
  ~Console();
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;
  void line(const std::string& text);
  void status(const std::string& text);
  // A status line only worth showing on a terminal (what is being measured).
  void transient(const std::string& text);
  void clear_status();

 private:
  bool terminal_;
  bool status_shown_ = false;
};

// A row's kernel path, with why a faster one did not apply in brackets; "-" for none.
std::string kernel_text(const ResultRow& row);
std::string table_header();
std::string table_row(const ResultRow& row);

// Per form and precision: the points by status, and the median time at the
// smallest and the largest L measured ok (the median over that L's points when
// other axes give it several).
void print_summary(const std::vector<ResultRow>& rows);

// One note per form that takes no chunk size (or has no slots) while the
// sweep gives several.
void print_unswept_axis_notes(const Sweep& sweep);

// --dry-run: the planned points, what --out holds of each (`rows`: empty with
// --fresh or no file), and the time each is predicted to take (from --out's
// rows of the same form and precision, as the progress line's ETA predicts;
// "?" without one).
void print_plan(const Sweep& sweep, const std::vector<Point>& points,
                const std::vector<ResultRow>& rows);

// A command line a shell runs as typed: words with special characters quoted.
std::string shell_quoted(const std::string& command_line);

}  // namespace attn
