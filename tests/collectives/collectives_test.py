#!/usr/bin/env python3
"""Collectives end to end: programs planned for several ranks run as real
processes under mpirun and compute what one rank computes.

    collectives_test.py --kiln KILN --run-mpi RUN_MPI.PY --mpirun MPIRUN --workdir DIR

  - tensor parallel: an MLP of Gemms, two pre-norm MLP blocks of MatMuls and
    a transformer block (8 heads), planned with --tensor-parallel 2, 4 and 8
    and run on as many ranks, match the single-rank program within 1e-5
    relative (and the single-rank program matches PyTorch);
    (every rank's output checked);
  - planned for cuda:0,cpu (MLP and transformer block, 2 and 4 ranks, with
    --allreduce one-shot and two-shot): the collectives and the symmetric
    arena on cuda:0, no copy but the input's and the output's, every
    collective run by the CUDA backend's all-reduce kernel of that kind
    (reading its peers' copies of the symmetric arena), and every rank
    matches one rank after 3 executes, run under KILN_CUDA_EXECUTION=host;
  - placement paths: one AllReduce per path (zero copy, method input, two
    explicit copies) on 2 ranks, counted in plan.json, and each sum of the
    ranks' different inputs right on every rank, on the CPU and on cuda:0;
  - reuse: 8 x (MatMul -> AllReduce) plans into one symmetric and one
    ordinary buffer, and computes the chain on 2 ranks with different
    inputs, on the CPU and on cuda:0;
  - the bias (and the transformer's residual) Add after each all-reduce
    fused into its write, reported in plan.json, and bit for bit what the
    --no-fuse program computes;
  - a bias and a per-rank residual fused into the write of both kernels
    on 2 and 4 ranks, and through a communicator without device peers
    (--device-peers off: its all_reduce(), then the backend's adds), right
    on every rank;
  - several nodes forced on one machine (--ranks-per-node 2): the
    transformer on 4 ranks as 2 nodes, on the CPU and on cuda:0;
  - one rank on cuda:0: collectives are copies on the device;
  - 1,000 executes of Relu -> AllReduce on cuda:0 over 4 ranks, with the
    one-shot and with the two-shot kernel;
  - a peer that stops arriving: the waiting rank's kernel gives up after
    the collective timeout and its run fails naming the peer; a peer that
    is killed: the communicator sees it exit and the kernel fails at once;
  - refusals: a program for 4 ranks on 3, and one for 2 ranks without mpirun,
    end with a message naming the rank counts.

With --launcher scripts/kiln-ranks --only cuda-ipc (no MPI needed): the same
programs planned for cuda:0,cpu on 2 ranks started by kiln's own launcher,
their collectives through the cuda-ipc communicator (CUDA virtual memory
under the host execution model): the MLP and transformer block with both
kernels against one rank (a tensor-parallel program takes the same input on
every rank; each rank's weight shard makes its operand its own), the bias
and per-rank residual case (every rank its own input, its own expected
output) with both kernels and through the communicator's all_reduce(), and
the 8-layer chain with different inputs: every rank's output checked; a
peer killed while the other waits in the kernel.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from kiln_checks import expect, finish  # noqa: E402


def check(ok, what):
    expect(what, ok)


# Whether every rank's log names the all-reduce kernels it set up.
def kernels_run(p, mode, ranks, collectives):
    lines = [line for line in p.stdout.splitlines() if f": {mode} kernel, rank " in line]
    return len(lines) == collectives * ranks


def run(cmd, expect_ok=True):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if expect_ok and p.returncode != 0:
        print(p.stdout)
        raise SystemExit(f"command failed: {' '.join(cmd)}")
    return p


def plan_chain(kiln, path, rank_inputs):
    """allreduce_chain.onnx (8 x MatMul -> AllReduce) planned for cuda:0,cpu on
    2 ranks as chain.cuda.kiln; returns what both ranks should get (their
    inputs summed, through the weights, each all-reduce doubling)."""
    m = onnx.load(path("allreduce_chain.onnx"))
    w = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    y = sum(rank_inputs("allreduce_chain", 2)) @ w["w0"]
    for i in range(1, 8):
        y = 2 * (y @ w[f"w{i}"])
    run([kiln, "plan", path("allreduce_chain.onnx"), "-o", path("chain.cuda.kiln"), "--ranks", "2", "--target",
         "cuda:0,cpu"])
    return y


def cuda_ipc_cases(kiln, path, ranks_run, outputs, rel, rank_inputs):
    """2 ranks from kiln's own launcher, their collectives through cuda-ipc."""
    def ipc(program, inputs, out, runs=1, extra=()):
        return ranks_run(2, program, inputs, out, cuda=True, runs=runs, extra=["--comm", "cuda-ipc"] + list(extra),
                         launcher=True)

    for model, adds in [("mlp_gemm", 1), ("transformer", 2)]:
        x = path(model + ".input.npy")
        single = path(model + ".kiln")
        run([kiln, "plan", path(model + ".onnx"), "-o", single])
        run([kiln, "run", single, "--input", x, "--output-dir", path("out_" + model)])
        want = np.load(path(f"out_{model}/output_0.npy"))
        for mode in ["one-shot", "two-shot"]:
            program = path(f"{model}.cuda.tp2.{mode}.kiln")
            report = path(f"report_{model}_cuda_2_{mode}")
            run([kiln, "plan", path(model + ".onnx"), "-o", program, "--target", "cuda:0,cpu", "--tensor-parallel",
                 "2", "--allreduce", mode, "--report", report])
            collectives = len(json.load(open(os.path.join(report, "plan.json")))["symmetric"]["all_reduce"])
            out = path(f"out_ipc_{model}_{mode}_{{rank}}")
            p = ipc(program, [x], out, runs=3)
            err = max(rel(y, want) for y in outputs(out, 2))
            check(collectives > 0 and kernels_run(p, mode, 2, collectives) and "'cuda-ipc'" not in p.stdout and
                  err <= 1e-5,
                  f"cuda-ipc: {model} on cuda:0, {mode} kernels: every one of 2 ranks set up its {collectives} "
                  f"kernels and matches one rank after 3 executes (relative error {err:.1e})")

    # Every rank its own input: rank r gets sum_q relu(x_q) + bias + x_r.
    xs = rank_inputs("allreduce_residual", 2)
    bias = np.load(path("allreduce_residual.bias.npy")).astype(np.float64)
    total = sum(np.maximum(x, 0) for x in xs)
    for mode, peers in [("one-shot", "on"), ("two-shot", "on"), ("one-shot", "off")]:
        program = path(f"residual.cuda.2.{mode}.kiln")
        run([kiln, "plan", path("allreduce_residual.onnx"), "-o", program, "--ranks", "2", "--target", "cuda:0,cpu",
             "--allreduce", mode])
        out = path(f"out_ipc_residual_{mode}_{peers}_{{rank}}")
        p = ipc(program, [path("allreduce_residual.input.rank{rank}.npy")], out, runs=2,
                extra=["--device-peers", peers])
        err = max(rel(o, total + bias + xs[r]) for r, o in enumerate(outputs(out, 2)))
        path_taken = (kernels_run(p, mode, 2, 1) if peers == "on" else
                      "communicator 'cuda-ipc' hands out no device peers" in p.stdout)
        how = f"{mode} kernel" if peers == "on" else "cuda-ipc's all_reduce(), then the backend's adds"
        check(path_taken and err <= 1e-6, f"cuda-ipc: bias and each rank's own residual on 2 ranks, {how}: every "
              f"rank right (relative error {err:.1e})")

    # 8 x MatMul -> AllReduce, different inputs on the two ranks.
    y = plan_chain(kiln, path, rank_inputs)
    out = path("out_ipc_chain_{rank}")
    ipc(path("chain.cuda.kiln"), [path("allreduce_chain.input.rank{rank}.npy")], out)
    err = max(rel(o, y) for o in outputs(out, 2))
    check(err <= 1e-5, f"cuda-ipc: 8 x MatMul->AllReduce on cuda:0, 2 ranks, different inputs (relative error "
          f"{err:.1e})")

    # A peer killed while the other waits in the kernel: cuda-ipc's watchdog
    # sees the process gone and the kernel fails the launch at once, naming
    # it, long before the collective timeout (30 s by default).
    run([kiln, "plan", path("allreduce_relu.onnx"), "-o", path("relu.cuda.2.kiln"), "--ranks", "2", "--target",
         "cuda:0,cpu"])
    runner = ("if [ \"$KILN_RANK\" = 1 ]; then \"$0\" run \"$1\" --input \"$2\" --runs 1 & pid=$!; "
              "sleep 2; kill -9 $pid; wait $pid; exit 0; fi; exec \"$0\" run \"$1\" --input \"$2\" --runs 3")
    launcher = os.path.join(HERE, "..", "..", "scripts", "kiln-ranks")
    cmd = [sys.executable, launcher, "-n", "2", "--max-seconds", "120", "--", "sh", "-c", runner, kiln,
           path("relu.cuda.2.kiln"), path("allreduce_relu.input.rank0.npy")]
    started = time.monotonic()
    env = {k: v for k, v in os.environ.items() if k != "KILN_COLLECTIVE_TIMEOUT_MS"}
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=dict(env, KILN_CUDA_EXECUTION="host"))
    seconds = time.monotonic() - started
    check(p.returncode != 0 and "peer rank 1 exited (its communicator saw it)" in p.stdout and seconds < 15,
          f"cuda-ipc: a peer killed while the other waits in the kernel: the launch fails naming it, in "
          f"{seconds:.1f} s (timeout 30 s)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--run-mpi", required=True)
    parser.add_argument("--mpirun")
    parser.add_argument("--launcher", help="scripts/kiln-ranks: ranks without MPI, through cuda-ipc")
    parser.add_argument("--only", choices=["cuda-ipc"], help="only the cases of this communicator")
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    work = args.workdir
    os.makedirs(work, exist_ok=True)
    run([sys.executable, os.path.join(HERE, "make_models.py"), work])
    kiln = args.kiln

    def path(name):
        return os.path.join(work, name)

    def mpi(ranks, program, inputs, out_dir, expect_ok=True, cuda=False, runs=1, extra=(), launcher=False):
        # out_dir may name "{rank}": then every rank writes its outputs.
        # launcher: the ranks started by kiln's own launcher (cuda-ipc).
        start = ["--launcher", args.launcher] if launcher else ["--mpirun", args.mpirun]
        cmd = [sys.executable, args.run_mpi] + start + ["-n", str(ranks), "--max-seconds", "120", "--",
                                                       kiln, "run", program, "--output-dir", out_dir, "--runs",
                                                       str(runs)] + list(extra)
        for i in inputs:
            cmd += ["--input", i]
        if not cuda:
            return run(cmd, expect_ok)
        env = dict(os.environ, KILN_CUDA_EXECUTION="host")
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        if expect_ok and p.returncode != 0:
            print(p.stdout)
            raise SystemExit(f"command failed: {' '.join(cmd)}")
        return p

    def outputs(out_dir, ranks, index=0):
        return [np.load(os.path.join(out_dir.replace("{rank}", str(r)), f"output_{index}.npy")) for r in range(ranks)]

    def rel(a, b):
        return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))

    def rank_inputs(name, ranks):
        return [np.load(path(f"{name}.input.rank{r}.npy")).astype(np.float64) for r in range(ranks)]

    if args.only == "cuda-ipc":
        cuda_ipc_cases(kiln, path, mpi, outputs, rel, rank_inputs)
        return finish()

    # Tensor parallelism against one rank.
    for model in ["mlp_gemm", "mlp_matmul", "transformer"]:
        x = path(model + ".input.npy")
        single = path(model + ".kiln")
        run([kiln, "plan", path(model + ".onnx"), "-o", single])
        run([kiln, "run", single, "--input", x, "--output-dir", path("out_" + model)])
        want = np.load(path(f"out_{model}/output_0.npy"))
        err = rel(want, np.load(path(model + ".expected.npy")))
        check(err <= 1e-4, f"{model}: one rank matches PyTorch (relative error {err:.1e})")
        for ranks in [2, 4, 8]:
            program = path(f"{model}.tp{ranks}.kiln")
            report = path(f"report_{model}_{ranks}")
            run([kiln, "plan", path(model + ".onnx"), "-o", program, "--tensor-parallel", str(ranks),
                 "--report", report])
            plan = json.load(open(os.path.join(report, "plan.json")))
            tp = plan["tensor_parallel"]
            check(plan["ranks"] == ranks and tp["row_splits"] >= 1 and
                  tp["weight_bytes_per_rank"] < tp["weight_bytes_total"],
                  f"{model}: {ranks} ranks, {tp['column_splits']} column and {tp['row_splits']} row splits, "
                  f"{tp['weight_bytes_per_rank']} of {tp['weight_bytes_total']} weight bytes per rank")
            out = path(f"out_{model}_{ranks}_{{rank}}")
            mpi(ranks, program, [x], out)
            err = max(rel(y, want) for y in outputs(out, ranks))
            check(err <= 1e-5, f"{model}: every one of {ranks} ranks matches one rank (relative error {err:.1e})")

    # Planned for a GPU: the collectives stay on cuda:0, beside the kernels
    # that feed them, and run across real processes under the host execution
    # model of CUDA (the device symmetric arena in an MPI shared window).
    # The collectives run as the CUDA backend's all-reduce kernels (one-shot
    # and two-shot, forced with --allreduce), reading the peers' copies of
    # the symmetric arena: each rank's log names every kernel it set up.
    for model in ["mlp_gemm", "transformer"]:
        x = path(model + ".input.npy")
        want = np.load(path(f"out_{model}/output_0.npy"))
        for ranks in [2, 4]:
            for mode in ["one-shot", "two-shot"]:
                program = path(f"{model}.cuda.tp{ranks}.{mode}.kiln")
                report = path(f"report_{model}_cuda_{ranks}_{mode}")
                run([kiln, "plan", path(model + ".onnx"), "-o", program, "--target", "cuda:0,cpu",
                     "--tensor-parallel", str(ranks), "--allreduce", mode, "--report", report])
                plan = json.load(open(os.path.join(report, "plan.json")))
                copies = [c for c in plan["copies"] if c["when"] == "run"]
                symmetric = [a for a in plan["arenas"] if a["kind"] == "symmetric"]
                check(plan["symmetric"]["devices"] == ["cuda:0"] and len(copies) == 2 and
                      [a["device"] for a in symmetric] == ["cuda:0"],
                      f"{model} for cuda:0 on {ranks} ranks: collectives on {plan['symmetric']['devices']}, "
                      f"symmetric arena on {[a['device'] for a in symmetric]}, {len(copies)} copies per run "
                      f"(input and output)")
                algorithms = [c["algorithm"] for c in plan["symmetric"]["all_reduce"]]
                check(len(algorithms) > 0 and set(algorithms) == {mode},
                      f"{model}, {ranks} ranks, --allreduce {mode}: plan.json gives {algorithms}")
                # The bias Add after each row split (and the transformer's
                # residual Add) fused into the all-reduce's write.
                fused = [c["fused_adds"] for c in plan["symmetric"]["all_reduce"]]
                adds = {"mlp_gemm": 1, "transformer": 2}[model]
                check(all(len(f) == adds for f in fused) and plan["fusion"]["all_reduce_addends"] == adds * len(fused),
                      f"{model}, {ranks} ranks: {adds} Add(s) fused into each all-reduce's write ({fused})")
                out = path(f"out_{model}_cuda_{ranks}_{mode}_{{rank}}")
                p = mpi(ranks, program, [x], out, cuda=True, runs=3)
                check(kernels_run(p, mode, ranks, len(algorithms)) and
                      p.stdout.count(f"{adds} addend{'s' if adds > 1 else ''} fused") == ranks * len(algorithms),
                      f"{model}, {ranks} ranks: every rank set up its {len(algorithms)} {mode} all-reduce kernels, "
                      f"each with its {adds} addend(s)")
                err = max(rel(y, want) for y in outputs(out, ranks))
                check(err <= 1e-5, f"{model} on cuda:0, {mode} kernels: every one of {ranks} ranks matches one rank "
                      f"after 3 executes (relative error {err:.1e})")
                if ranks != 2:
                    continue
                # The same program unfused (--no-fuse) computes the same bits:
                # the addends are added in the Adds' order, after the sum.
                unfused = path(f"{model}.cuda.tp{ranks}.{mode}.nofuse.kiln")
                run([kiln, "plan", path(model + ".onnx"), "-o", unfused, "--target", "cuda:0,cpu",
                     "--tensor-parallel", str(ranks), "--allreduce", mode, "--no-fuse"])
                out_unfused = path(f"out_{model}_cuda_{ranks}_{mode}_nofuse_{{rank}}")
                mpi(ranks, unfused, [x], out_unfused, cuda=True)
                same = all(np.array_equal(a, b) for a, b in zip(outputs(out, ranks), outputs(out_unfused, ranks)))
                check(same, f"{model} on cuda:0, {mode}, 2 ranks: fused and --no-fuse outputs are bit for bit equal")

    # The three placement paths, each summed over 2 ranks holding different inputs.
    report = path("report_paths")
    run([kiln, "plan", path("allreduce_paths.onnx"), "-o", path("paths.kiln"), "--ranks", "2", "--report", report])
    sym = json.load(open(os.path.join(report, "plan.json")))["symmetric"]
    check(sym["collectives"] == 5 and sym["zero_copy"]["operands"] == 1 and sym["input_buffers"]["operands"] == 1 and
          sym["input_buffers"]["copies"] == 1 and sym["explicit_copies"]["operands"] == 2,
          f"placement paths counted: {json.dumps(sym)}")
    xs = rank_inputs("allreduce_paths", 2)
    m = onnx.load(path("allreduce_paths.onnx"))
    w = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    want = sum(x @ w["w"] + 2 * x + w["c"] + np.maximum(x, 0) for x in xs)
    run([kiln, "plan", path("allreduce_paths.onnx"), "-o", path("paths.cuda.kiln"), "--ranks", "2", "--target",
         "cuda:0,cpu"])
    for program, cuda in [("paths.kiln", False), ("paths.cuda.kiln", True)]:
        out = path(f"out_{program}_{{rank}}")
        mpi(2, path(program), [path("allreduce_paths.input.rank{rank}.npy")], out, cuda=cuda)
        err = max(rel(y, want) for y in outputs(out, 2))
        check(err <= 1e-5, f"placement paths ({program}): sums of different inputs right on both ranks "
              f"(relative error {err:.1e})")

    # One rank on cuda:0: each collective is a copy on the device.
    run([kiln, "plan", path("allreduce_paths.onnx"), "-o", path("paths.cuda1.kiln"), "--target", "cuda:0,cpu"])
    p = subprocess.run([kiln, "run", path("paths.cuda1.kiln"), "--input", path("allreduce_paths.input.rank0.npy"),
                        "--output-dir", path("out_paths_cuda1")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, env=dict(os.environ, KILN_CUDA_EXECUTION="host"))
    x = rank_inputs("allreduce_paths", 1)[0]
    want = x @ w["w"] + 2 * x + w["c"] + np.maximum(x, 0)
    err = rel(np.load(path("out_paths_cuda1/output_0.npy")), want) if p.returncode == 0 else float("inf")
    check(err <= 1e-5, f"placement paths on cuda:0, one rank: device copies (relative error {err:.1e})")

    # One symmetric and one ordinary buffer for 8 layers.
    report = path("report_chain")
    run([kiln, "plan", path("allreduce_chain.onnx"), "-o", path("chain.kiln"), "--ranks", "2", "--no-packing",
         "--report", report])
    plan = json.load(open(os.path.join(report, "plan.json")))
    layer = 4 * 64 * 4
    sizes = {a["kind"]: a["size"] for a in plan["arenas"]}
    check(sizes == {"symmetric": layer, "ordinary": layer},
          f"8 x MatMul->AllReduce: one symmetric and one ordinary buffer of {layer} bytes ({sizes})")
    y = plan_chain(kiln, path, rank_inputs)
    for program, cuda in [("chain.kiln", False), ("chain.cuda.kiln", True)]:
        out = path(f"out_{program}_{{rank}}")
        mpi(2, path(program), [path("allreduce_chain.input.rank{rank}.npy")], out, cuda=cuda)
        err = max(rel(o, y) for o in outputs(out, 2))
        check(err <= 1e-5, f"8 x MatMul->AllReduce ({program}) on 2 ranks, different inputs "
              f"(relative error {err:.1e})")

    # 1,000 executes of one method, each kernel: the signal counters only
    # grow, the kernel replays as a recorded graph, and every rank's last
    # sum is still right.
    want = sum(np.maximum(x, 0) for x in rank_inputs("allreduce_relu", 4))
    for mode in ["one-shot", "two-shot"]:
        program = path(f"relu.cuda.{mode}.kiln")
        run([kiln, "plan", path("allreduce_relu.onnx"), "-o", program, "--ranks", "4", "--target", "cuda:0,cpu",
             "--allreduce", mode])
        out = path(f"out_relu_{mode}_{{rank}}")
        p = mpi(4, program, [path("allreduce_relu.input.rank{rank}.npy")], out, cuda=True, runs=1000)
        err = max(rel(o, want) for o in outputs(out, 4))
        check(kernels_run(p, mode, 4, 1) and err <= 1e-5,
              f"Relu -> AllReduce on cuda:0, {mode} kernel, 4 ranks, 1,000 executes: every rank right "
              f"(relative error {err:.1e})")

    # A bias and a residual fused into the all-reduce's write, the residual
    # each rank's own input: rank r gets sum_q relu(x_q) + bias + x_r, with
    # either kernel, and through the communicator's all_reduce() (a
    # communicator without device peers) followed by the backend's adds.
    xs = rank_inputs("allreduce_residual", 4)
    bias = np.load(path("allreduce_residual.bias.npy")).astype(np.float64)
    runs = [(2, "one-shot", "on"), (2, "two-shot", "on"), (4, "one-shot", "on"), (4, "two-shot", "on"),
            (2, "one-shot", "off")]
    for ranks, mode, peers in runs:
        program = path(f"residual.cuda.{ranks}.{mode}.kiln")
        report = path(f"report_residual_{ranks}_{mode}")
        run([kiln, "plan", path("allreduce_residual.onnx"), "-o", program, "--ranks", str(ranks), "--target",
             "cuda:0,cpu", "--allreduce", mode, "--report", report])
        fused = json.load(open(os.path.join(report, "plan.json")))["symmetric"]["all_reduce"][0]["fused_adds"]
        out = path(f"out_residual_{ranks}_{mode}_{peers}_{{rank}}")
        p = mpi(ranks, program, [path("allreduce_residual.input.rank{rank}.npy")], out, cuda=True, runs=2,
                extra=["--device-peers", peers])
        total = sum(np.maximum(x, 0) for x in xs[:ranks])
        err = max(rel(o, total + bias + xs[r]) for r, o in enumerate(outputs(out, ranks)))
        how = (f"{mode} kernel" if peers == "on" else
               "the communicator's all_reduce(), then the backend's adds")
        path_taken = (kernels_run(p, mode, ranks, 1) if peers == "on" else
                      "hands out no device peers, so it runs through the communicator's all_reduce(), then its "
                      "addends" in p.stdout)
        check(fused == ["bias_add", "residual_add"] and path_taken and err <= 1e-6,
              f"bias and residual fused ({fused}) on {ranks} ranks, {how}: every rank adds its own residual "
              f"(relative error {err:.1e})")

    # Several nodes, forced on one machine (--ranks-per-node 2): each node
    # reduces in its shared-memory windows, node leaders through
    # MPI_Allreduce, then a broadcast per node. The tensor-parallel
    # transformer on 4 ranks as 2 nodes matches one rank, on the CPU and
    # planned for cuda:0 (device collectives through the communicator, the
    # fused bias and residual added by the backend after it).
    x = path("transformer.input.npy")
    want = np.load(path("out_transformer/output_0.npy"))
    for program, cuda in [("transformer.tp4.kiln", False), ("transformer.cuda.tp4.one-shot.kiln", True)]:
        out = path(f"out_nodes_{program}_{{rank}}")
        p = mpi(4, path(program), [x], out, cuda=cuda, extra=["--ranks-per-node", "2"])
        err = max(rel(y, want) for y in outputs(out, 4))
        said = "4 ranks on 2 nodes" in p.stdout
        check(said and err <= 1e-5, f"transformer on 4 ranks as 2 nodes ({'cuda:0' if cuda else 'cpu'}): every "
              f"rank matches one rank (relative error {err:.1e})")

    # A peer that stops arriving: rank 1 executes once and leaves, rank 0
    # executes again; its kernel waits for rank 1 no longer than the
    # collective timeout, then fails the launch, and kiln run fails naming
    # the peer, instead of hanging.
    runner = ("if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then runs=1; else runs=3; fi; "
              "exec \"$0\" run \"$1\" --input \"$2\" --runs $runs")
    cmd = [sys.executable, args.run_mpi, "--mpirun", args.mpirun, "-n", "2", "--max-seconds", "120", "--", "sh", "-c",
           runner, kiln, path("relu.cuda.2.kiln"), path("allreduce_relu.input.rank0.npy")]
    run([kiln, "plan", path("allreduce_relu.onnx"), "-o", path("relu.cuda.2.kiln"), "--ranks", "2", "--target",
         "cuda:0,cpu"])
    started = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=dict(os.environ, KILN_CUDA_EXECUTION="host", KILN_COLLECTIVE_TIMEOUT_MS="2000"))
    seconds = time.monotonic() - started
    check(p.returncode != 0 and "peer rank 1 did not reach step" in p.stdout and
          "a peer did not arrive within 2000 ms" in p.stdout and seconds < 60,
          f"a peer that never arrives: rank 0's kernel gives up after the 2 s timeout and the run fails "
          f"with the peer named, in {seconds:.1f} s")

    # A peer killed while the other waits in the kernel: rank 1 executes
    # once and waits to finish, then is SIGKILLed; rank 0's communicator
    # sees the process gone and its kernel fails the launch at once, naming
    # it, long before the collective timeout (30 s by default).
    runner = ("if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then \"$0\" run \"$1\" --input \"$2\" --runs 1 & pid=$!; "
              "sleep 2; kill -9 $pid; wait $pid; exit 0; fi; exec \"$0\" run \"$1\" --input \"$2\" --runs 3")
    cmd = [sys.executable, args.run_mpi, "--mpirun", args.mpirun, "-n", "2", "--max-seconds", "120", "--", "sh", "-c",
           runner, kiln, path("relu.cuda.2.kiln"), path("allreduce_relu.input.rank0.npy")]
    started = time.monotonic()
    env = {k: v for k, v in os.environ.items() if k != "KILN_COLLECTIVE_TIMEOUT_MS"}
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=dict(env, KILN_CUDA_EXECUTION="host"))
    seconds = time.monotonic() - started
    check(p.returncode != 0 and "peer rank 1 exited (its communicator saw it)" in p.stdout and
          "failed: peer rank 1 exited" in p.stdout and seconds < 15,
          f"a peer killed while the other waits in the kernel: the launch fails naming it, in {seconds:.1f} s "
          f"(timeout 30 s)")

    # cuda-ipc under mpirun: the ranks from OpenMPI's environment, the
    # rendezvous from the job's PMIx namespace, no MPI call.
    x = path("mlp_gemm.input.npy")
    want = np.load(path("out_mlp_gemm/output_0.npy"))
    out = path("out_ipc_mpirun_{rank}")
    p = mpi(2, path("mlp_gemm.cuda.tp2.one-shot.kiln"), [x], out, cuda=True, runs=2, extra=["--comm", "cuda-ipc"])
    err = max(rel(y, want) for y in outputs(out, 2))
    check(kernels_run(p, "one-shot", 2, 1) and err <= 1e-5,
          f"cuda-ipc under mpirun: mlp_gemm on cuda:0, 2 ranks match one rank (relative error {err:.1e})")

    # Refusals.
    x = path("transformer.input.npy")
    p = mpi(3, path("transformer.tp4.kiln"), [x], path("out_refused"), expect_ok=False)
    check(p.returncode != 0 and "planned for 4 ranks" in p.stdout and "'mpi-shm' has 3" in p.stdout,
          "a program for 4 ranks refuses 3")
    p = run([kiln, "run", path("transformer.tp2.kiln"), "--input", x], expect_ok=False)
    check(p.returncode != 0 and "planned for 2 ranks" in p.stdout and "mpirun -n 2" in p.stdout,
          "a program for 2 ranks run alone says how to launch it")

    return finish()


if __name__ == "__main__":
    sys.exit(main())
