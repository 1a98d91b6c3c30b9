#include "signals.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <string>

namespace attn::interruption {
namespace {

std::atomic<int> signal_number_{0};
std::atomic<int> signals_received{0};
std::atomic<bool> writing_row{false};
// Written before the handler is installed (write() is async-signal-safe, string building is not).
char resume_hint[8192] = "";
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free &&
                  std::atomic<long long>::is_always_lock_free,
              "signal handlers need lock-free atomics");

void say(const char* text) {
  const ssize_t written = ::write(STDERR_FILENO, text, std::char_traits<char>::length(text));
  (void)written;
}

std::atomic<long long> first_signal_ns{0};

long long monotonic_ns() {  // clock_gettime is async-signal-safe
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

extern "C" void on_signal(int sig) {
  signal_number_ = sig;
  // A second signal within half a second is the same interruption delivered
  // twice (`timeout` signals its child and then the child's process group).
  if (signals_received > 0 && monotonic_ns() - first_signal_ns < 500000000LL) return;
  if (signals_received.fetch_add(1) == 0) {
    first_signal_ns = monotonic_ns();
    say("\nbench: interrupted: finishing the current point, then stopping (interrupt again to "
        "abandon it)\n");
  } else if (!writing_row) {
    say("\nbench: abandoned the current point; the result file keeps every row written before "
        "it\n");
    say(resume_hint);
    ::_exit(128 + sig);
  }
}

}  // namespace

bool requested() { return signals_received > 0; }

int signal_number() { return signal_number_; }

void set_resume_hint(const std::string& hint) {
  std::snprintf(resume_hint, sizeof resume_hint, "%s", hint.c_str());
}

Guard::Guard() {
  signal_number_ = 0;
  signals_received = 0;
  struct sigaction action {};
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESTART;  // system calls under way (file writes) go on
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
  // A closed terminal (SIGHUP) ends the sweep as Ctrl-C does, files closed
  // whole; under nohup (SIGHUP ignored) it is still ignored.
  sigaction(SIGHUP, nullptr, &previous_hup_);
  if (previous_hup_.sa_handler != SIG_IGN) sigaction(SIGHUP, &action, nullptr);
}

Guard::~Guard() {
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
  sigaction(SIGHUP, &previous_hup_, nullptr);
}

WritingRow::WritingRow() { writing_row = true; }
WritingRow::~WritingRow() { writing_row = false; }

}  // namespace attn::interruption
