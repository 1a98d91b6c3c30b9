// Ctrl-C during a sweep. SIGINT, SIGTERM or SIGHUP (a closed terminal; left
// ignored under nohup): the point being measured (a
// kernel cannot be stopped midway) finishes and is written, then the sweep
// stops and the file is closed. A second signal abandons that point at once:
// every row written before it is already flushed, so the handler ends the
// process, unless a row is being written just then, in which case the sweep
// stops right after that write.
#pragma once
#include <csignal>
#include <string>

namespace attn::interruption {

// Whether a signal asked the sweep to stop.
bool requested();

// The signal that did (SIGINT, SIGTERM or SIGHUP); 0 before any.
int signal_number();

// "To resume, run ...", kept before the handler is installed, so that the
// handler can print it when it ends the process; longer text is cut.
void set_resume_hint(const std::string& hint);

// Installs the handler for the sweep's lifetime; the previous handlers come back after.
class Guard {
 public:
  Guard();
  ~Guard();
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  struct sigaction previous_int_ {
  }, previous_term_{}, previous_hup_{};
};

// Marks a row write, during which a second signal does not end the process.
class WritingRow {
 public:
  WritingRow();
  ~WritingRow();
  WritingRow(const WritingRow&) = delete;
  WritingRow& operator=(const WritingRow&) = delete;
};

}  // namespace attn::interruption
