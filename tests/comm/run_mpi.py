#!/usr/bin/env python3
"""Runs a test program under mpirun and judges how the job ended.

    run_mpi.py --mpirun PATH -n N --expect ok|killed|stuck|fault --max-seconds S -- PROGRAM ARGS...
    run_mpi.py --launcher scripts/kiln-ranks -n N ...   the ranks without MPI (cuda-ipc)

-n 0 runs PROGRAM alone, without mpirun, in the same environment.
--launcher starts the ranks with kiln's own launcher instead of mpirun
(KILN_RANK, KILN_WORLD_SIZE, KILN_RENDEZVOUS); the expectations are the
same ("fault" is mpirun's only).

mpirun is told to keep the job on this machine (shared memory and self
only), to allow root (CI runs as root) and more ranks than cores; its
process group is killed if the job outlives --max-seconds, which fails the
test rather than hanging ctest (after printing each process's state, what
it waits in, and its stacks where gdb exists).

  ok      exit status 0
  killed  a rank SIGKILLed itself: the job must end with a non-zero status
          within the bound, and the output must carry either the
          communicator's message (a peer exited) or mpirun's (a rank was
          killed by signal 9)
  stuck   a rank sleeps past KILN_COLLECTIVE_TIMEOUT_MS (set to 1500 here):
          every other rank must report "PeerFailed as expected" within the
          bound (mpirun's own exit status is not looked at: the ranks that
          gave up leave without MPI_Finalize, which mpirun reports)
  fault   rank 1 is SIGKILLed in the middle of a collective: mpirun runs
          with --enable-recovery, so the job goes on without it, and every
          other rank must report "PeerFailed as expected" and the
          communicator's message that rank 1 exited; and no shared-memory
          segment may be left behind. OpenMPI's segments (its shared-memory
          transport's and the windows') are put in a directory of this run's
          own under /dev/shm (btl_vader_backing_directory,
          osc_sm_backing_directory), so that other jobs on the machine do
          not blur the check: it is watched while the job runs (segments
          must appear there, or the check would see nothing) and must be
          empty after it; /dev/shm's own entries are listed before and after
          too, and a new one naming this job's files fails the run.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time


class SegmentWatch:
    """OpenMPI's shared-memory files of one job, in a directory of its own
    under /dev/shm, watched while the job runs and checked after it."""

    def __init__(self, env):
        self.before = set(os.listdir("/dev/shm"))
        self.dir = tempfile.mkdtemp(prefix="kiln-comm-", dir="/dev/shm")
        env["OMPI_MCA_btl_vader_backing_directory"] = self.dir
        env["OMPI_MCA_osc_sm_backing_directory"] = self.dir
        self.most = 0
        self.seen = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)
        self.thread.start()

    def watch(self):
        while not self.stop.wait(0.02):
            try:
                names = os.listdir(self.dir)
            except OSError:
                continue
            self.most = max(self.most, len(names))
            self.seen.update(names)

    def finish(self):
        self.stop.set()
        self.thread.join()
        left = sorted(os.listdir(self.dir))
        new = sorted(set(os.listdir("/dev/shm")) - self.before - {os.path.basename(self.dir)})
        print(f"run_mpi.py: shared-memory files seen in {self.dir} while the job ran: {self.most} at once "
              f"({', '.join(sorted(self.seen)) or 'none'}); left after it: {len(left)}")
        print(f"run_mpi.py: /dev/shm: {len(self.before)} entries before, new after: {', '.join(new) or 'none'}")
        problems = []
        if not self.seen:
            problems.append(f"no shared-memory file ever appeared in {self.dir}: the check would see nothing")
        if left:
            problems.append(f"shared-memory files left behind: {', '.join(left)}")
        jobs = {name.split(".")[-2] for name in self.seen if name.count(".") >= 2}
        ours = [name for name in new if any(job in name for job in jobs)]
        if ours:
            problems.append(f"this job's files left in /dev/shm: {', '.join(ours)}")
        shutil.rmtree(self.dir, ignore_errors=True)
        return problems


def describe_hang(group):
    """Where each process of the job's group is, before it is killed: its
    state, what it waits in, and its threads' stacks where gdb exists, so a
    rare hang leaves more than its timeout behind."""
    gdb = shutil.which("gdb")
    for name in sorted(os.listdir("/proc")):
        if not name.isdigit():
            continue
        try:
            if os.getpgid(int(name)) != group:
                continue
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{name}/wchan") as f:
                wchan = f.read()
            with open(f"/proc/{name}/cmdline") as f:
                command = f.read().replace("\0", " ").strip()
        except OSError:
            continue
        state = stat[stat.rfind(")") + 2:].split(" ", 1)[0]
        print(f"run_mpi.py: hang: pid {name} state {state} waiting in {wchan or '-'}: {command}", flush=True)
        if gdb:
            try:
                trace = subprocess.run([gdb, "-p", name, "-batch", "-ex", "thread apply all bt 12"],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                       timeout=20).stdout
                for line in trace.splitlines():
                    if line.startswith(("#", "Thread")):
                        print(f"run_mpi.py:   {line}", flush=True)
            except subprocess.TimeoutExpired:
                print(f"run_mpi.py:   gdb could not attach to {name} in 20 s", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mpirun")
    parser.add_argument("--launcher")
    parser.add_argument("-n", type=int, required=True)
    parser.add_argument("--expect", choices=["ok", "killed", "stuck", "fault"], default="ok")
    parser.add_argument("--max-seconds", type=float, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command

    env = dict(os.environ)
    # Quiet and local: shared memory and self only, no network probing, and
    # no warning about the transports left out.
    env.update({
        "OMPI_MCA_btl": "self,vader",
        "OMPI_MCA_btl_base_warn_component_unused": "0",
        "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
        "OMPI_MCA_pml": "ob1",
        "OMPI_MCA_osc": "sm",
        "OMPI_MCA_rmaps_base_oversubscribe": "1",
        "OMPI_MCA_hwloc_base_binding_policy": "none",
        # Under AddressSanitizer: OpenMPI's malloc hooks fight the sanitizer's.
        "OMPI_MCA_memory": "^patcher",
    })
    # The sanitizer build: no leak check. OpenMPI keeps thousands of blocks
    # until exit, most allocated by its components, which MPI_Finalize
    # unloads, so their stacks name no module to suppress by. Address and
    # undefined-behaviour checks stay on.
    env["ASAN_OPTIONS"] = "detect_leaks=0:" + env.get("ASAN_OPTIONS", "")
    if args.expect == "stuck":
        env["KILN_COLLECTIVE_TIMEOUT_MS"] = "1500"
    recovery = ["--enable-recovery"] if args.expect == "fault" else []
    argv = [args.mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"] + recovery + [
        "-n", str(args.n)] + command
    if args.n == 0:
        argv = command  # one process, without mpirun (MPI starts as a singleton)
    elif args.launcher:
        argv = [sys.executable, args.launcher, "-n", str(args.n), "--"] + command
    elif not args.mpirun:
        parser.error("--mpirun or --launcher")
    segments = SegmentWatch(env) if args.expect == "fault" else None

    start = time.monotonic()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=args.max_seconds)
        timed_out = False
    except subprocess.TimeoutExpired:
        describe_hang(process.pid)
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        timed_out = True
    elapsed = time.monotonic() - start
    print(" ".join(argv))
    print(output)
    print(f"run_mpi.py: exit status {process.returncode} after {elapsed:.1f} s")
    segment_problems = segments.finish() if segments else []

    problems = []
    if timed_out:
        problems.append(f"the job did not end within {args.max_seconds} s (a hang)")
    elif args.expect == "ok":
        if process.returncode != 0:
            problems.append(f"exit status {process.returncode}")
    elif args.expect == "killed":
        if process.returncode == 0:
            problems.append("a rank was killed, yet the job ended with status 0")
        ours = re.search(r"peer rank 1 \(pid \d+\) exited", output)
        theirs = re.search(r"rank 1 .*(signal 9|Killed)", output, re.S)
        if not ours and not theirs:
            problems.append("neither the communicator nor mpirun said that rank 1 died")
    else:
        for rank in range(args.n):
            if rank == 1:
                continue
            if f"rank {rank}: PeerFailed as expected" not in output:
                problems.append(f"rank {rank} did not report PeerFailed")
        if args.expect == "stuck" and ("peer rank 1 (pid" not in output or "within 1500 ms" not in output):
            problems.append("no message naming rank 1 and the timeout")
        if args.expect == "fault" and not re.search(r"peer rank 1 \(pid \d+\) exited", output):
            problems.append("no message that rank 1 exited")
    problems += segment_problems
    if "FAIL" in output:
        problems.append("a rank reported FAIL")
    for p in problems:
        print(f"run_mpi.py: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
