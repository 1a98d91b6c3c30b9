#include "distributed.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <type_traits>

namespace attn::distributed {
namespace {

bool started = false;  // MPI_Init ran (Session)
int this_rank = 0, rank_count = 1;
int local_rank = 0, local_ranks = 1;  // among the ranks on this host
// Rank 0: the job ends by MPI_Abort, not MPI_Finalize (Session): a rank
// stopped answering (Collector), or a rank's points were left (end_failed).
std::atomic<bool> job_failed{false};

// Set by mpirun (Open MPI, MPICH, Intel MPI) or srun (PMI, PMIx) for each rank
// it starts; not by a Slurm batch script itself, where bench runs alone.
bool launched_with_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    const char* value = std::getenv(name);
    if (value && *value) return true;
  }
  return false;
}

// Rows, then `done`, go from a rank to rank 0; heartbeats both ways; once
// every rank is done and rank 0 has written every row, rank 0 sends `close`
// and each rank answers `closed` before it finalizes MPI.
enum Tag : int { row_tag = 1, done_tag = 2, heartbeat_tag = 3, close_tag = 4, closed_tag = 5 };

// --- a row as bytes ---------------------------------------------------------------

class Writer {
 public:
  template <class T>
  void put(const T& x) {
    static_assert(std::is_trivially_copyable_v<T>);
    append(&x, sizeof x);
  }
  void put(const std::string& s) {
    put(std::uint64_t(s.size()));
    append(s.data(), s.size());
  }
  void put(const std::vector<double>& v) {
    put(std::uint64_t(v.size()));
    append(v.data(), v.size() * sizeof(double));
  }
  void put(const AxisValues& axes) {
    put(std::uint64_t(axes.size()));
    for (const auto& [name, value] : axes) put(name), put(value);
  }
  std::vector<char> bytes;

 private:
  void append(const void* from, std::size_t n) {
    if (n == 0) return;
    const std::size_t at = bytes.size();
    bytes.resize(at + n);
    std::memcpy(bytes.data() + at, from, n);
  }
};

class Reader {
 public:
  explicit Reader(const std::vector<char>& bytes) : bytes_(bytes) {}
  template <class T>
  void get(T& x) {
    static_assert(std::is_trivially_copyable_v<T>);
    take(&x, sizeof x);
  }
  void get(std::string& s) {
    std::uint64_t n = 0;
    get(n);
    s.resize(n);
    take(s.data(), n);
  }
  void get(std::vector<double>& v) {
    std::uint64_t n = 0;
    get(n);
    v.resize(n);
    take(v.data(), n * sizeof(double));
  }
  void get(AxisValues& axes) {
    std::uint64_t n = 0;
    get(n);
    axes.resize(n);
    for (auto& [name, value] : axes) get(name), get(value);
  }

 private:
  void take(void* to, std::size_t n) {
    if (at_ + n > bytes_.size()) throw std::runtime_error("a message between ranks ended early");
    std::memcpy(to, bytes_.data() + at_, n);
    at_ += n;
  }
  const std::vector<char>& bytes_;
  std::size_t at_ = 0;
};

// Every member of ResultRow, in one order for writing and reading (a member
// added to ResultRow goes here too, or it arrives at rank 0 empty).
template <class Stream, class Row>
void each_member(Stream& s, Row& r) {
  for (auto* text :
       {&r.form, &r.family, &r.backend, &r.precision, &r.status, &r.note, &r.variant, &r.revision})
    s.put_or_get(*text);
  s.put_or_get(r.axes);
  for (auto* number : {&r.reps, &r.err_heads, &r.err_rows, &r.iterations}) s.put_or_get(*number);
  for (auto* number :
       {&r.time_median_s, &r.time_min_s, &r.time_max_s, &r.time_mean_s, &r.flops, &r.bytes,
        &r.gflops, &r.gbps, &r.max_abs_err, &r.rel_l2_err, &r.time_stddev_s})
    s.put_or_get(*number);
  s.put_or_get(r.peak_bytes);
  s.put_or_get(r.samples);
}
struct Packing {
  Writer& w;
  template <class T>
  void put_or_get(const T& x) {
    w.put(x);
  }
};
struct Unpacking {
  Reader& r;
  template <class T>
  void put_or_get(T& x) {
    r.get(x);
  }
};

void pack(Writer& w, const ResultRow& row) {
  Packing p{w};
  each_member(p, row);
}
ResultRow unpack(Reader& r) {
  ResultRow row;
  Unpacking u{r};
  each_member(u, row);
  return row;
}

std::vector<char> receive_bytes(const MPI_Status& status) {
  int n = 0;
  MPI_Get_count(&status, MPI_CHAR, &n);
  std::vector<char> bytes(static_cast<std::size_t>(n));
  MPI_Recv(bytes.data(), n, MPI_CHAR, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD,
           MPI_STATUS_IGNORE);
  return bytes;
}

void broadcast(std::vector<char>& bytes) {
  std::uint64_t n = bytes.size();
  MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  bytes.resize(n);
  MPI_Bcast(bytes.data(), int(n), MPI_CHAR, 0, MPI_COMM_WORLD);
}

using Clock = std::chrono::steady_clock;
constexpr auto heartbeat_interval = std::chrono::seconds(1);
// How long a rank may stay silent before it is taken for gone: ten heartbeats.
constexpr auto silence_limit = std::chrono::seconds(10);
constexpr auto poll_interval = std::chrono::milliseconds(
    10);  // rows are seconds apart; less would take CPU from the host backend

// An empty message nobody waits for (its request is freed at once): a heartbeat, or close.
void send_empty(int to, int tag) {
  MPI_Request request;
  MPI_Isend(nullptr, 0, MPI_CHAR, to, tag, MPI_COMM_WORLD, &request);
  MPI_Request_free(&request);
}

}  // namespace

// --- the session ---------------------------------------------------------------

Session::Session(int& argc, char**& argv) {
  if (!launched_with_ranks()) return;
  // Serialized: on a rank, one thread at a time calls MPI (the main thread
  // before and after measuring, the Collector's or Sender's thread meanwhile).
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  if (provided < MPI_THREAD_SERIALIZED) {
    fmt::print(stderr, "bench: this MPI library cannot be called from several threads in turn\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  started = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &this_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &rank_count);
  MPI_Comm host;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, this_rank, MPI_INFO_NULL, &host);
  MPI_Comm_rank(host, &local_rank);
  MPI_Comm_size(host, &local_ranks);
  MPI_Comm_free(&host);
  if (this_rank != 0) {  // one table and one progress line: rank 0's
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) {
      std::fflush(stdout);
      ::dup2(null, STDOUT_FILENO);
      ::close(null);
    }
  }
}

Session::~Session() {
  if (!started) return;
  // Open MPI 4.1 under `--mca orte_abort_on_non_zero_status 0` keeps the
  // other ranks going when one is killed, but mpirun then never sees the job
  // end, and exits 0 whatever the ranks' statuses: once rank 0 has written
  // every row and closed the file, a failed job is ended here instead
  // (mpirun exits 1).
  if (job_failed) {
    std::fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
}

bool active() { return started && rank_count > 1; }
void end_failed() { job_failed = true; }
int rank() { return this_rank; }
int ranks() { return rank_count; }

Kokkos::InitArguments kokkos_arguments() {
  Kokkos::InitArguments arguments;
  if (!active()) return arguments;
#ifdef KOKKOS_ENABLE_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0)
    arguments.device_id = local_rank % devices;
#endif
  if (!std::getenv("OMP_NUM_THREADS")) {
    // mpirun binds each rank to its cores (by default with up to 2 ranks a
    // host: a core each; more: a socket each); a rank left every core of the
    // host (--bind-to none, srun without binding) shares them with the
    // host's other ranks.
    cpu_set_t mask;
    CPU_ZERO(&mask);
    const int host_cpus = int(sysconf(_SC_NPROCESSORS_ONLN));
    const int mask_cpus =
        sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : host_cpus;
    arguments.num_threads =
        mask_cpus < host_cpus ? mask_cpus : std::max(1, host_cpus / local_ranks);
  }
  return arguments;
}

std::string describe_rank(const std::string& host, const std::string& device,
                          const std::string& openmp_threads) {
  std::string where = fmt::format("rank {}: host {}, device {}", this_rank, host, device);
#ifdef KOKKOS_ENABLE_CUDA
  int device_id = -1;
  if (cudaGetDevice(&device_id) == cudaSuccess) where += fmt::format(" (GPU {})", device_id);
#endif
  return where + fmt::format(", {} OpenMP threads", openmp_threads);
}

void abort_job(const std::string& message) {
  fmt::print(stderr, "{}\n", message);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return
}

// --- dealing --------------------------------------------------------------------

std::vector<int> deal(const std::vector<ResultRow>& todo, const std::vector<double>& predicted_s,
                      int ranks) {
  std::map<PointKey, std::vector<std::size_t>> series;
  for (std::size_t i = 0; i < todo.size(); ++i) {
    series[key_of(todo[i]).without("seq")].push_back(i);
  }
  struct Series {
    double seconds;
    const std::vector<std::size_t>* points;
  };
  std::vector<Series> order;
  for (const auto& [key, points] : series) {
    double seconds = 0;
    for (std::size_t i : points) seconds += predicted_s[i];
    order.push_back({seconds, &points});
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const Series& a, const Series& b) { return a.seconds > b.seconds; });
  std::vector<double> load(std::size_t(ranks), 0.0);
  std::vector<int> owner(todo.size(), 0);
  for (const auto& s : order) {
    const int least = int(std::min_element(load.begin(), load.end()) - load.begin());
    load[std::size_t(least)] += s.seconds;
    for (std::size_t i : *s.points) owner[i] = least;
  }
  return owner;
}

Plan share_plan(const std::optional<Plan>& plan) {
  Writer w;
  if (this_rank == 0) {
    w.put(std::uint8_t(plan.has_value()));
    if (plan) {
      w.put(std::uint64_t(plan->kept.size()));
      for (const auto& row : plan->kept) pack(w, row);
      w.put(std::uint64_t(plan->owner.size()));
      for (int owner : plan->owner) w.put(owner);
    }
  }
  broadcast(w.bytes);
  if (this_rank == 0) return plan ? *plan : Plan{};  // without one, rank 0 goes on to say why
  Reader r(w.bytes);
  std::uint8_t go = 0;
  r.get(go);
  if (!go) throw Stopped("rank 0 could not start the sweep (its message says why)");
  Plan received;
  std::uint64_t n = 0;
  r.get(n);
  for (std::uint64_t i = 0; i < n; ++i) received.kept.push_back(unpack(r));
  r.get(n);
  received.owner.resize(n);
  for (int& owner : received.owner) r.get(owner);
  return received;
}

std::vector<std::string> gather_lines(const std::string& line) {
  const int length = int(line.size());
  std::vector<int> lengths(static_cast<std::size_t>(rank_count));
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> offsets(std::size_t(rank_count), 0);
  std::partial_sum(lengths.begin(), lengths.end() - 1, offsets.begin() + 1);
  std::vector<char> all(this_rank == 0 ? std::size_t(offsets.back() + lengths.back()) : 0);
  MPI_Gatherv(line.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
              0, MPI_COMM_WORLD);
  std::vector<std::string> lines;
  if (this_rank == 0)
    for (std::size_t i = 0; i < lengths.size(); ++i)
      lines.emplace_back(all.data() + offsets[i], std::size_t(lengths[i]));
  return lines;
}

// --- rank 0 receives ------------------------------------------------------------

Collector::Collector(Take take) : take_(std::move(take)), thread_([this] { receive(); }) {}

Collector::~Collector() { finish(); }

std::vector<int> Collector::finish() {
  finishing_ = true;
  if (thread_.joinable()) thread_.join();
  return lost_;
}

void Collector::receive() {
  // Ranks still measuring, and ranks done but not yet closed: both must be heard
  // from every silence_limit, or they are taken for lost.
  std::set<int> waiting, finished;
  std::map<int, Clock::time_point> heard;
  for (int r = 1; r < rank_count; ++r) {
    waiting.insert(r);
    heard[r] = Clock::now();
  }
  bool closing = false;
  auto last_heartbeat = Clock::now() - heartbeat_interval;
  for (;;) {
    if (!closing && waiting.empty() && finishing_) {  // every row is in: close the others
      for (int r : finished) send_empty(r, close_tag);
      closing = true;
    }
    if (closing && finished.empty()) return;
    int arrived = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &arrived, &status);
    const auto now = Clock::now();
    if (arrived) {
      const std::vector<char> bytes = receive_bytes(status);
      heard[status.MPI_SOURCE] = now;
      if (status.MPI_TAG == row_tag) {
        Reader r(bytes);
        double wall_s = 0;
        r.get(wall_s);
        const ResultRow row = unpack(r);
        try {
          take_(row, wall_s, status.MPI_SOURCE);
        } catch (const std::exception& e) {
          abort_job(fmt::format("bench: error: {}", e.what()));
        }
      } else if (status.MPI_TAG == done_tag && waiting.erase(status.MPI_SOURCE)) {
        finished.insert(status.MPI_SOURCE);
      } else if (status.MPI_TAG == closed_tag) {
        finished.erase(status.MPI_SOURCE);
      }
      continue;
    }
    if (now - last_heartbeat >= heartbeat_interval) {
      for (const std::set<int>* ranks : {&waiting, &finished})
        for (int r : *ranks) send_empty(r, heartbeat_tag);
      last_heartbeat = now;
    }
    for (std::set<int>* ranks : {&waiting, &finished})
      for (auto it = ranks->begin(); it != ranks->end();) {
        if (now - heard[*it] > silence_limit) {
          lost_.push_back(*it);
          job_failed = true;
          it = ranks->erase(it);
        } else {
          ++it;
        }
      }
    std::this_thread::sleep_for(poll_interval);
  }
}

// --- the other ranks send ---------------------------------------------------------

struct Sender::Queue {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::vector<char>> messages;
  bool done = false;
};

Sender::Sender() : queue_(std::make_unique<Queue>()), thread_([this] { run(); }) {}

Sender::~Sender() {
  {
    const std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->done = true;
  }
  queue_->changed.notify_one();
  thread_.join();
}

void Sender::send(const ResultRow& row, double wall_s) {
  Writer w;
  w.put(wall_s);
  pack(w, row);
  {
    const std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->messages.push_back(std::move(w.bytes));
  }
  queue_->changed.notify_one();
}

void Sender::run() {
  auto heard = Clock::now(), last_heartbeat = Clock::now() - heartbeat_interval;
  // Sends one message, listening to rank 0 meanwhile; false when rank 0 went silent.
  auto deliver = [&](std::vector<char>& bytes, int tag) {
    MPI_Request request;
    MPI_Isend(bytes.data(), int(bytes.size()), MPI_CHAR, 0, tag, MPI_COMM_WORLD, &request);
    for (int sent = 0;;) {
      MPI_Test(&request, &sent, MPI_STATUS_IGNORE);
      if (sent) return true;
      if (Clock::now() - heard > silence_limit) return false;
      std::this_thread::sleep_for(poll_interval);
    }
  };
  auto gone = [] {
    abort_job(fmt::format(
        "bench: rank {}: rank 0 stopped answering (the result file keeps every row it received); "
        "ending the job",
        this_rank));
  };
  auto listen = [&] {  // rank 0's heartbeats
    for (int arrived = 1; arrived;) {
      MPI_Iprobe(0, heartbeat_tag, MPI_COMM_WORLD, &arrived, MPI_STATUS_IGNORE);
      if (arrived) {
        MPI_Recv(nullptr, 0, MPI_CHAR, 0, heartbeat_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        heard = Clock::now();
      }
    }
  };
  auto beat = [&] {  // this rank's heartbeat; gone() when rank 0 went silent
    if (Clock::now() - heard > silence_limit) gone();
    if (Clock::now() - last_heartbeat >= heartbeat_interval) {
      send_empty(0, heartbeat_tag);
      last_heartbeat = Clock::now();
    }
  };
  for (;;) {
    std::vector<char> message;
    bool last = false;
    {
      std::unique_lock<std::mutex> lock(queue_->mutex);
      queue_->changed.wait_for(lock, poll_interval * 10,
                               [&] { return !queue_->messages.empty() || queue_->done; });
      if (!queue_->messages.empty()) {
        message = std::move(queue_->messages.front());
        queue_->messages.pop_front();
      } else {
        last = queue_->done;
      }
    }
    listen();
    if (last) {
      std::vector<char> none;
      if (!deliver(none, done_tag)) gone();
      break;
    }
    if (!message.empty() && !deliver(message, row_tag)) gone();
    beat();
  }
  // Done: alive (heartbeats both ways) until rank 0 closes, so that rank 0
  // knows this rank reaches MPI_Finalize with it; then acknowledged.
  for (;;) {
    listen();
    int closed = 0;
    MPI_Iprobe(0, close_tag, MPI_COMM_WORLD, &closed, MPI_STATUS_IGNORE);
    if (closed) {
      MPI_Recv(nullptr, 0, MPI_CHAR, 0, close_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      std::vector<char> none;
      if (!deliver(none, closed_tag)) gone();
      return;
    }
    beat();
    std::this_thread::sleep_for(poll_interval);
  }
}

}  // namespace attn::distributed
