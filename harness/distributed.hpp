// One sweep over the ranks of an MPI job (the ATTN_MPI build; README.md,
// "Sweeps over many GPUs"): each rank takes one GPU by its rank on the host,
// or its share of the host's cores; rank 0 deals the points out, series by
// series, by predicted time, and writes the one result file as the other
// ranks send it their rows. A rank that stops answering loses only the point
// it was measuring. A process that no launcher started runs as without MPI.
#pragma once
#include <Kokkos_Core.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "results_file.hpp"

namespace attn::distributed {

// MPI for the process's lifetime when mpirun or srun started it as one of
// several ranks (the launcher's variables say so); otherwise nothing. The other
// ranks' standard output is dropped: tables and progress come from rank 0.
class Session {
 public:
  Session(int& argc, char**& argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

bool active();  // this process is one of several ranks
// Rank 0: ends the job by MPI_Abort (exit 1 from mpirun) rather than
// MPI_Finalize, once its rows are written: some points were left.
void end_failed();
int rank();
int ranks();

// Where this rank runs, for Kokkos: the GPU of its rank on the host (CUDA
// builds), and as many OpenMP threads as its share of the cores the launcher
// left it (unless OMP_NUM_THREADS says).
Kokkos::InitArguments kokkos_arguments();

// This rank's line of the result file's `ranks` attribute, after Kokkos has
// started: "rank 1: host h, device D, 8 OpenMP threads".
std::string describe_rank(const std::string& host, const std::string& device,
                          const std::string& openmp_threads);

// The rank of each point to measure (planned rows, each with its predicted
// seconds): the points of a series (the same point but for L) stay on one
// rank, so that skipping larger L after an oom or timeout still works; series
// go largest first to the rank with the least predicted work so far.
std::vector<int> deal(const std::vector<ResultRow>& todo, const std::vector<double>& predicted_s,
                      int ranks);

// What rank 0 tells every rank before measuring: the rows --out holds (they
// bound and predict their series on the rank that measures them), the rank
// of each point to measure, and every rank's line of the `ranks` attribute.
struct Plan {
  std::vector<ResultRow> kept;
  std::vector<int> owner;
};
// Rank 0 passes its plan, or nullopt when it could not start (it says why; the
// others then throw Stopped); the others receive it.
Plan share_plan(const std::optional<Plan>& plan);
// Every rank's describe_rank line, gathered on rank 0 (empty elsewhere).
std::vector<std::string> gather_lines(const std::string& line);

// Thrown on ranks other than 0 when rank 0 could not start the sweep: bad
// input (an --out that cannot be resumed), which rank 0 reports.
struct Stopped : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Ends every rank of the job, after `message` on standard error: for a rank 0
// that fails once the others measure, which it can no longer tell otherwise.
[[noreturn]] void abort_job(const std::string& message);

// Rank 0: a thread that receives the rows the other ranks measure and hands
// each to `take`, until every other rank has sent its last row or stopped
// answering (no word for 10 s: killed, or its host gone).
class Collector {
 public:
  using Take = std::function<void(const ResultRow& row, double wall_s, int rank)>;
  explicit Collector(Take take);
  ~Collector();  // waits for the other ranks (see finish)
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;
  // Waits until every other rank is done and closed, or silent (then the job
  // ends by MPI_Abort: Session); returns the silent ones.
  std::vector<int> finish();

 private:
  void receive();
  Take take_;
  std::vector<int> lost_;
  std::atomic<bool> finishing_{false};  // rank 0 has measured its own points
  std::thread thread_;
};

// Ranks other than 0: sends each row to rank 0 as soon as it is measured,
// from a thread that also tells rank 0 every second that this rank is alive.
// When rank 0 stops answering, this rank stops with a line on stderr.
class Sender {
 public:
  Sender();
  ~Sender();  // tells rank 0 this rank is done, after the rows still queued
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;
  void send(const ResultRow& row, double wall_s);

 private:
  void run();
  struct Queue;
  std::unique_ptr<Queue> queue_;
  std::thread thread_;
};

}  // namespace attn::distributed
