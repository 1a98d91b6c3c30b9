"""Measure experiments into result files: ours with `bench run`, then the public implementations with
experiments/peers on the same device, one experiment per GPU at a time (results/README.md: how the
files in results/ were measured).

    experiments/measure --bench build-cuda/bench --out results --gpus 0,1,2,3
    experiments/measure --bench build/bench --out /tmp/r --no-peers quick quick_all

EXPERIMENT is a name in experiments/ (NAME.cfg) or a path to a .cfg file; its rows go to OUT/NAME.h5.
Without EXPERIMENT: the GPU experiments of results/ (lightning_fig4, lightning_fig4_baselines,
lion_fig1, gsa_slots, gsa_seq, all_forms, all_forms_axes).
With --gpus, one worker per GPU (its processes see only that GPU, CUDA_VISIBLE_DEVICES) takes the next
experiment in order and measures it whole, ours then the peers, so each file's rows come from one device.
Without it, one worker measures them in order on the device bench picks (the host for an OpenMP build).
Every step resumes: the same command again keeps the points a file holds (bench) and its peer rows
(experiments/peers). Ctrl-C or SIGTERM: each running step finishes its current point and stops, and no
other starts (exit 130). --time-limit S does the same S seconds after the start (exit 124), for a
machine lent for a fixed time: leave a point's time for the running points to finish.
Each step's console output is appended to OUT/logs/NAME.log (ours) or OUT/logs/NAME_peers.log, headed
by its command and start time; this program prints one line per step. Exit 0 when every step exited 0.
"""
import argparse
import datetime
import os
import queue
import signal
import subprocess
import sys
import threading
import time

from . import common

# experiments/ of the checkout holding this package (python/attn_harness/): the experiment files and
# the peers command.
EXPERIMENTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "experiments")
RESULTS_EXPERIMENTS = ("lightning_fig4", "lightning_fig4_baselines", "lion_fig1", "gsa_slots", "gsa_seq",
                       "all_forms", "all_forms_axes")

fail = common.failer("measure")


def config_path(experiment):
    """An experiment's .cfg: a path as given, else experiments/NAME.cfg."""
    path = experiment if experiment.endswith(".cfg") else os.path.join(EXPERIMENTS, experiment + ".cfg")
    if not os.path.isfile(path):
        fail(f"no experiment {experiment} (no file {path})")
    return path


class Steps:
    """The running steps' processes, stopped together on Ctrl-C or SIGTERM."""

    def __init__(self):
        self.lock = threading.Lock()
        self.running = set()
        self.stopping = False
        self.failed = []

    def stop(self, signum, frame):
        with self.lock:
            self.stopping = True
            for process in self.running:
                # Each step is its own process group, so a terminal's Ctrl-C reaches it only through
                # here, once: a second SIGINT would make bench abandon its point.
                process.send_signal(signal.SIGINT)

    def run(self, label, command, log_path, env):
        """Runs one step with its output appended to log_path; False when it did not exit 0."""
        with self.lock:
            if self.stopping:
                return False
            with open(log_path, "a") as log:
                log.write(f"== {datetime.datetime.now():%Y-%m-%d %H:%M:%S} {' '.join(command)}\n")
                log.flush()
                started = time.monotonic()
                process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                           start_new_session=True)
            self.running.add(process)
        status = process.wait()
        with self.lock:
            self.running.discard(process)
        with open(log_path) as log:
            last = ([line.strip() for line in log if line.strip()] or [""])[-1]
        print(f"{label}: exit {status} after {time.monotonic() - started:.0f} s: {last[:160]}", flush=True)
        if status != 0:
            self.failed.append(label)
        return status == 0


def main():
    parser = argparse.ArgumentParser(prog="experiments/measure", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiments", nargs="*", metavar="EXPERIMENT",
                        help="names in experiments/ or .cfg paths (default: results/'s GPU experiments)")
    parser.add_argument("--bench", default="build-cuda/bench", help="the bench binary (default build-cuda/bench)")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder of the result files (OUT/NAME.h5)")
    parser.add_argument("--gpus", metavar="LIST", help="GPU indices, one worker each, e.g. 0,1,2,3")
    parser.add_argument("--no-peers", action="store_true", help="ours only")
    parser.add_argument("--time-limit", type=float, metavar="S",
                        help="stop as Ctrl-C does S seconds after the start (exit 124)")
    parser.add_argument("--peers", metavar="NAMES", help="only these peers (experiments/peers --peers)")
    parser.add_argument("--peers-module", help=argparse.SUPPRESS)  # the tests' numpy peers
    args = parser.parse_args()
    configs = [(os.path.basename(path)[:-len(".cfg")], path)
               for path in map(config_path, args.experiments or RESULTS_EXPERIMENTS)]
    names = [name for name, _ in configs]
    if len(set(names)) != len(names):
        fail("an experiment is named twice: each writes OUT/NAME.h5")
    common.check_bench(args.bench, fail)
    gpus = [None]
    if args.gpus is not None:
        gpus = args.gpus.split(",")
        if not all(g.isdigit() for g in gpus) or len(set(gpus)) != len(gpus):
            fail(f"--gpus {args.gpus}: want distinct GPU indices separated by commas, e.g. 0,1")
    if args.time_limit is not None and not args.time_limit > 0:
        fail(f"--time-limit {args.time_limit:g}: want a number of seconds > 0")
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)

    todo = queue.Queue()
    for config in configs:
        todo.put(config)
    steps = Steps()
    signal.signal(signal.SIGINT, steps.stop)
    signal.signal(signal.SIGTERM, steps.stop)

    def worker(gpu):
        env = dict(os.environ)
        where = "" if gpu is None else f"gpu {gpu}, "
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu
        while not steps.stopping:
            try:
                name, path = todo.get_nowait()
            except queue.Empty:
                return
            result = os.path.join(args.out, name + ".h5")
            logs = os.path.join(args.out, "logs", name)
            ours = steps.run(f"{where}{name}, ours", [args.bench, "run", path, "--out", result], logs + ".log", env)
            if not ours or args.no_peers:
                continue  # the peers follow our grid in our file: not without it
            peers = [sys.executable, os.path.join(EXPERIMENTS, "peers"), "--bench", args.bench, "--out", result]
            peers += ["--peers", args.peers] if args.peers else []
            peers += ["--peers-module", args.peers_module] if args.peers_module else []
            steps.run(f"{where}{name}, peers", peers + ["--", "run", path], logs + "_peers.log", env)

    deadline = None if args.time_limit is None else time.monotonic() + args.time_limit
    timed_out = False
    workers = [threading.Thread(target=worker, args=(gpu,)) for gpu in gpus]
    for w in workers:
        w.start()
    while any(w.is_alive() for w in workers):
        for w in workers:
            w.join(0.2)  # in short waits, so that the main thread takes Ctrl-C at once
        if deadline is not None and not steps.stopping and time.monotonic() > deadline:
            timed_out = True
            steps.stop(None, None)
    if steps.stopping:
        reason = f"--time-limit {args.time_limit:g} s reached" if timed_out else "interrupted"
        print(f"measure: {reason}; the same command again resumes every file", file=sys.stderr)
        sys.exit(124 if timed_out else 130)
    if steps.failed:
        print(f"measure: {len(steps.failed)} step(s) did not exit 0: {', '.join(steps.failed)} "
              f"(their logs are in {os.path.join(args.out, 'logs')})", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
