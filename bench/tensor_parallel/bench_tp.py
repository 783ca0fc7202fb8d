#!/usr/bin/env python3
"""End-to-end tensor parallelism on host ranks: an MLP (two pre-norm blocks,
d_model x 4*d_model x d_model, GELU) planned once for one rank and once with
--tensor-parallel N, run by `kiln run --runs R` alone and under
`mpirun -n N`; prints the median latency of each, the speed-up over one
rank, and the outputs' agreement.

    bench_tp.py --kiln build/release/bin/kiln [--ranks 2] [--dim 1024] [--tokens 32] [--runs 50]

Ranks are processes on this machine: with N ranks on N cores each rank owns
a core; beyond that they share cores and the figure says nothing about a
real multi-GPU machine. The collective is the mpi-shm communicator's
one-shot all-reduce (--collective-sync flags) or its barrier fallback.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_MPI = os.path.join(HERE, "..", "..", "tests", "comm", "run_mpi.py")


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.fc2(nn.functional.gelu(self.fc1(self.norm(x))))


def median_ms(output):
    m = re.search(r"latency: median ([0-9.]+) ms", output)
    if not m:
        sys.exit("no latency in:\n" + output)
    return float(m.group(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--mpirun", default="mpirun")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="kiln_tp_")
    torch.manual_seed(0)
    model = nn.Sequential(Block(args.dim), Block(args.dim)).eval()
    x = torch.randn(1, args.tokens, args.dim)
    onnx_path = os.path.join(work, "mlp.onnx")
    torch.onnx.export(model, (x,), onnx_path, input_names=["x"], output_names=["y"], opset_version=17)
    np.save(os.path.join(work, "x.npy"), x.numpy())

    def plan(out, *extra):
        subprocess.run([args.kiln, "plan", onnx_path, "-o", out, *extra], check=True, stdout=subprocess.DEVNULL)

    def run(program, out_dir, ranks=1, sync="flags"):
        cmd = [args.kiln, "run", program, "--input", os.path.join(work, "x.npy"), "--runs", str(args.runs),
               "--output-dir", out_dir]
        if ranks > 1:
            cmd = [sys.executable, RUN_MPI, "--mpirun", args.mpirun, "-n", str(ranks), "--max-seconds", "600", "--",
                   *cmd, "--collective-sync", sync]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            sys.exit(p.stdout)
        return median_ms(p.stdout), np.load(os.path.join(out_dir, "output_0.npy"))

    single, tp = os.path.join(work, "one.kiln"), os.path.join(work, "tp.kiln")
    plan(single)
    plan(tp, "--tensor-parallel", str(args.ranks))
    one_ms, want = run(single, os.path.join(work, "out1"))
    # What the machine can give N processes at once: N copies of the
    # one-rank program run side by side. Perfect cores would keep each at
    # one_ms; shared cores (SMT siblings, a VM's vCPUs) or shared memory
    # bandwidth slow each, and bound what any split across ranks can gain.
    copies = [subprocess.Popen([args.kiln, "run", single, "--input", os.path.join(work, "x.npy"), "--runs",
                                str(args.runs)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
              for _ in range(args.ranks)]
    side_by_side = [median_ms(c.communicate()[0]) for c in copies]
    ceiling = args.ranks * one_ms / (sum(side_by_side) / len(side_by_side))
    rows = [("1 rank", one_ms, 0.0)]
    for sync in ["flags", "barrier"]:
        ms, got = run(tp, os.path.join(work, "out_" + sync), args.ranks, sync)
        err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        rows.append((f"{args.ranks} ranks ({sync})", ms, err))
    print(f"MLP 2 x ({args.dim} -> {4 * args.dim} -> {args.dim}), {args.tokens} tokens, {os.cpu_count()} cores, "
          f"median of {args.runs} runs")
    print(f"{'program':<22} {'ms':>9} {'speed-up':>9} {'rel. error vs 1 rank':>22}")
    for name, ms, err in rows:
        print(f"{name:<22} {ms:9.3f} {one_ms / ms:8.2f}x {err:22.1e}")
    print(f"ceiling: {args.ranks} copies of the 1-rank program side by side take "
          f"{', '.join(f'{ms:.3f}' for ms in side_by_side)} ms each: this machine gives {args.ranks} processes "
          f"{ceiling:.2f}x the throughput of one, the most a {args.ranks}-way split can gain here")


if __name__ == "__main__":
    main()
