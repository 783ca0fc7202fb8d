#!/usr/bin/env python3
"""The CUDA backend on real models, planned here and run on a GPU machine.

  bundle  (where the planner is: bench/cuda_bundle.sh) each model (random
          weights, fixed seed: mobilenet_v2, resnet18, a transformer
          encoder block as bench/models/bench_models.py builds them) is
          exported to ONNX and planned for `--target cuda:0,cpu` and for
          the CPU; kiln on the CPU runs the CPU program for the expected
          output. OUT/<name>/ holds program.kiln (cuda:0,cpu), input_0.bin,
          expected_0.bin (kiln CPU), torch_0.bin (PyTorch CPU) and
          meta.json, as `kiln-runner check` reads them, and
          program_fp16.kiln / program_bf16.kiln (--precisions) with the
          error bound of each in meta.json; the ONNX model and
          the CPU program stay in a temporary folder (--keep: beside them).
  run     (on the GPU machine: bench/cuda_gpu.sh) kiln-runner runs each
          program.kiln `--runs N` times. The table gives kiln's median
          latency on cuda:0 (host input in, host output out: the copies
          are included; the first run warms up, the second captures the
          CUDA graph, the median leaves both out), the max relative error
          of its output against kiln on the CPU and against PyTorch, and
          PyTorch's batch-1 latency on the same GPU in eager mode and with
          torch.compile(mode="reduce-overhead") (CUDA graphs), the model
          rebuilt from bench_models.py with the same seed, input already on
          the GPU, synchronised per run (--no-torch leaves it out). Exit 1
          when kiln cuda:0 is more than 1e-4 (relative to the largest
          output) from kiln CPU. --models defaults to every model the
          bundle holds.

  gemm    (on the GPU machine) one N x N x N GEMM's TFLOP/s through kiln
          (cuBLASLt), from two programs of the bundle (X times itself once,
          and 9 times: their latency difference is 8 GEMMs, the copies
          cancelling), planned with --precision fp32, tf32, fp16 and bf16
          (16-bit storage: cuBLASLt CUDA_R_16F / CUDA_R_16BF with FP32
          compute), beside torch.matmul in FP32, TF32, FP16 and BF16.
  Weights are rounded to BF16 values (model_and_input). Each PyTorch
  column may fail alone (nan, the reason on stderr), and a model kiln-runner
  fails on is a row marked failed: the other rows stay. --load-only (the dry
  run) loads and binds each program only.

usage: cuda_models.py bundle --kiln PATH --out DIR [--models a,b] [--vulkan-models a] [--gemm N] [--keep]
                             [--precisions fp16,bf16] [--precision-models a,b]
       cuda_models.py run --runner PATH --bundle DIR [--runs 50] [--workdir DIR] [--models a,b] [--no-torch]
                          [--tolerance 1e-4] [--program program_vulkan.kiln --device vulkan:0] [--load-only]
                          [--program program_fp16.kiln | program_bf16.kiln]
       cuda_models.py gemm --runner PATH --bundle DIR [--runs 10] [--workdir DIR] [--no-torch]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODELS = "mobilenet_v2,resnet18,encoder_block"
UNIT_ROUNDOFF = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}


def model_and_input(name):
    """The model (random weights, fixed seed) and its input. Weights are
    rounded to BF16's values (still FP32): a bundle's programs then compress
    to about half (what is carried to a GPU machine is limited), and FP16/BF16
    runs start from the same weights exactly."""
    import torch
    sys.path.insert(0, os.path.join(HERE, "models"))
    from bench_models import MODELS  # noqa: E402
    entry = MODELS[name]
    torch.manual_seed(1234)
    model = entry[0]().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    return calibrated(model, entry[1]), torch.randn(*entry[1])


def calibrated(model, shape):
    """BatchNorm statistics from random batches, as training would leave
    them. With the initial statistics (mean 0, variance 1) mobilenet_v2's
    activations shrink layer by layer to outputs near 1e-9, below FP16's
    smallest subnormal: its FP16 program then returns zeros on any device
    (the first GPU run found this). Each channel's scale 1/sqrt(var) is
    snapped to a power of two and epsilon made 2^-100 (PyTorch refuses 0;
    below half an ULP of any variance kept, so var + eps == var), so the
    weights the planner folds it into stay BF16 values (the bundle keeps
    compressing to half)."""
    import torch
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return model
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the batches
    model.train()
    generator = torch.Generator().manual_seed(4321)
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, *shape[1:], generator=generator))
        for m in norms:
            k = torch.round(-0.5 * torch.log2(m.running_var + m.eps)).clamp(-20, 20)
            m.running_var.copy_(torch.exp2(-2 * k))
            m.running_mean.copy_(m.running_mean.to(torch.bfloat16).float())
            m.eps = 2.0 ** -100
    return model.eval()


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def bundle(args):
    os.makedirs(args.out, exist_ok=True)
    for name in filter(None, args.models.split(",")):
        case = os.path.join(args.out, name)
        os.makedirs(case, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            bundle_one(args, name, case, case if args.keep else tmp)


def bundle_one(args, name, case, work):
    import torch
    model, x = model_and_input(name)
    with torch.no_grad():
        y = model(x).numpy().astype(np.float32)
    onnx_path = os.path.join(work, "model.onnx")
    torch.onnx.export(model, x, onnx_path, opset_version=17, input_names=["x"], output_names=["y"])
    x_np = x.numpy().astype(np.float32)
    np.save(os.path.join(work, "input.npy"), x_np)
    x_np.tofile(os.path.join(case, "input_0.bin"))
    y.tofile(os.path.join(case, "torch_0.bin"))
    targets = [("cuda:0,cpu", os.path.join(case, "program.kiln")), ("cpu", os.path.join(work, "cpu.kiln"))]
    if name in args.vulkan_models.split(","):
        targets.append(("vulkan:0,cpu", os.path.join(case, "program_vulkan.kiln")))
    for target, program in targets:
        subprocess.run([args.kiln, "plan", onnx_path, "-o", program, "--target", target],
                       check=True, stdout=subprocess.DEVNULL)
    # 16-bit device storage: each precision's program and its bound, the
    # one tests/models/cuda_precision_models.py states (2 u sqrt(k + 1), k
    # the kernels that round to 16 bits, from plan.json).
    tolerances = {}
    precisions = []
    for entry in args.precision_models.split(","):
        model, *chosen = entry.split(":")
        if model == name:
            precisions = chosen or args.precisions.split(",")
    for precision in [p for p in precisions if p]:
        report = os.path.join(work, f"report_{precision}")
        subprocess.run([args.kiln, "plan", onnx_path, "-o", os.path.join(case, f"program_{precision}.kiln"),
                        "--target", "cuda:0,cpu", "--precision", precision, "--report", report],
                       check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(report, "plan.json")) as f:
            kernels = json.load(f)["precision_storage"]["kernels_16bit"]
        tolerances[precision] = 2 * UNIT_ROUNDOFF[precision] * (kernels + 1) ** 0.5
    subprocess.run([args.kiln, "run", os.path.join(work, "cpu.kiln"), "--input", os.path.join(work, "input.npy"),
                    "--output-dir", work], check=True, stdout=subprocess.DEVNULL)
    expected = np.load(os.path.join(work, "output_0.npy")).astype(np.float32)
    expected.tofile(os.path.join(case, "expected_0.bin"))
    # Each 16-bit program checked here under the host execution model (seconds
    # for these models), so a bound the data cannot meet fails now, not on the
    # GPU machine.
    for precision, bound in tolerances.items():
        out_dir = os.path.join(work, f"host_{precision}")
        subprocess.run([args.kiln, "run", os.path.join(case, f"program_{precision}.kiln"), "--input",
                        os.path.join(work, "input.npy"), "--output-dir", out_dir], check=True,
                       stdout=subprocess.DEVNULL, env=dict(os.environ, KILN_CUDA_EXECUTION="host"))
        error = rel(np.load(os.path.join(out_dir, "output_0.npy")).astype(np.float32), expected)
        print(f"{name} {precision} under the host execution model: {error:.1e} of kiln on the CPU (bound {bound:.1e})")
        if not error <= bound:
            raise SystemExit(f"{name} {precision}: {error:.1e} is outside its bound {bound:.1e} under the host "
                             "execution model; the GPU run would fail it too")
    with open(os.path.join(case, "meta.json"), "w") as f:
        json.dump({"input_shape": list(x.shape), "output_shape": list(y.shape), "seed": 1234,
                   "kiln_cpu_vs_torch": rel(expected, y), "tolerance": tolerances}, f)
    print(f"{name}: {tuple(x.shape)} -> {tuple(y.shape)}, kiln CPU vs PyTorch {rel(expected, y):.1e}, "
          f"planned into {case}")


def runner_ms(runner, case, out_dir, runs, program="program.kiln", inputs=("input_0.bin",)):
    os.makedirs(out_dir, exist_ok=True)
    command = [runner, "run", os.path.join(case, program), "--output-dir", out_dir, "--runs", str(runs)]
    for i in inputs:
        command += ["--input", os.path.join(case, i)]
    out = subprocess.run(command, check=True, capture_output=True, text=True)
    sys.stderr.write(out.stderr)
    return float(re.search(r"median ([0-9.]+) ms", out.stdout).group(1)), np.fromfile(
        os.path.join(out_dir, "output_0.bin"), dtype=np.float32)


def torch_ms(fn, x, runs):
    import torch
    for _ in range(5):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn(x)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))


def torch_column(what, name, fn):
    """One PyTorch figure, or nan (the reason on stderr) when it fails: a
    torch.compile that cannot build leaves the other columns and rows."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - any failure of a peer's column is reported, not fatal
        print(f"  {name}: {what} failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
              file=sys.stderr, flush=True)
        return float("nan")


def torch_columns(name, runs, precision=None):
    """PyTorch eager and torch.compile(mode="reduce-overhead") latency on the GPU, each allowed to fail alone;
    in FP16 or BF16 (model and input cast) beside a 16-bit kiln program."""
    import torch

    def eager():
        with torch.no_grad():
            return torch_ms(gpu, xg, runs)

    def compiled():
        with torch.no_grad():
            return torch_ms(torch.compile(gpu, mode="reduce-overhead"), xg, runs)

    try:
        model, x = model_and_input(name)
        gpu, xg = model.cuda(), x.cuda()
        if precision is not None:
            dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
            gpu, xg = gpu.to(dtype), xg.to(dtype)
    except Exception as e:  # noqa: BLE001
        print(f"  {name}: PyTorch on the GPU failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return float("nan"), float("nan")
    return torch_column("torch eager", name, eager), torch_column("torch.compile", name, compiled)


def load_only(args, name):
    """The dry run's row: the program loads and binds (kiln-runner run --runs 0) and the bundle's expected
    outputs have the output's size; nothing runs (under the host execution model a model takes minutes)."""
    case = os.path.join(args.bundle, name)
    with open(os.path.join(case, "meta.json")) as f:
        elements = int(np.prod(json.load(f)["output_shape"]))
    sizes = [os.path.getsize(os.path.join(case, f)) // 4 for f in ("expected_0.bin", "torch_0.bin")]
    out = subprocess.run([args.runner, "run", os.path.join(case, args.program), "--input",
                          os.path.join(case, "input_0.bin"), "--runs", "0"], capture_output=True, text=True)
    ok = out.returncode == 0 and sizes == [elements, elements]
    if not ok:
        print(f"  {name}: {out.stderr.strip()[-2000:]} (expected outputs {sizes}, output {elements})", file=sys.stderr)
    print(f"| {name} | {'loads and binds' if ok else 'FAILED'} | {elements} outputs expected | - | - | - | - |",
          flush=True)
    return ok


def kiln_row(args, name):
    """kiln's latency and errors for one model, or None (the reason on stderr) when kiln-runner fails."""
    case = os.path.join(args.bundle, name)
    try:
        ms, y = runner_ms(args.runner, case, os.path.join(args.workdir, name), args.runs, args.program)
    except (subprocess.CalledProcessError, AttributeError, OSError) as e:
        detail = getattr(e, "stderr", None) or getattr(e, "stdout", None) or str(e)
        print(f"  {name}: kiln-runner failed: {str(detail).strip()[-2000:]}", file=sys.stderr, flush=True)
        return None
    e_cpu = rel(y, np.fromfile(os.path.join(case, "expected_0.bin"), dtype=np.float32))
    e_torch = rel(y, np.fromfile(os.path.join(case, "torch_0.bin"), dtype=np.float32))
    return ms, e_cpu, e_torch


def precision_of(args):
    """fp16 or bf16 for a program_fp16.kiln / program_bf16.kiln run, else None."""
    m = re.fullmatch(r"program_(fp16|bf16)\.kiln", args.program)
    return m.group(1) if m else None


def tolerance_of(args, name):
    """--tolerance, or for a 16-bit program the bound its bundle stated."""
    precision = precision_of(args)
    if precision is None:
        return args.tolerance
    with open(os.path.join(args.bundle, name, "meta.json")) as f:
        return json.load(f)["tolerance"][precision]


def run(args):
    """One table row per model, printed as soon as it is measured (a run cut short keeps what it has)."""
    names = args.models.split(",") if args.models else sorted(
        d for d in os.listdir(args.bundle) if os.path.exists(os.path.join(args.bundle, d, args.program)))
    precision = precision_of(args)
    bound = f"bound {args.tolerance:.0e}" if precision is None else f"{precision} storage, bound per model"
    torch_in = "" if precision is None else f" ({precision})"
    print(f"| model | kiln {args.device}{torch_in} ms | vs kiln CPU (rel, {bound}) | vs PyTorch (rel) | "
          f"torch eager{torch_in} ms | torch.compile reduce-overhead{torch_in} ms | kiln / compile |")
    print("|---|---|---|---|---|---|---|", flush=True)
    bad = []
    for name in names:
        if args.load_only:
            bad += [] if load_only(args, name) else [name]
            continue
        kiln = kiln_row(args, name)
        eager = graphs = float("nan")
        if not args.no_torch:
            eager, graphs = torch_columns(name, args.runs, precision)
        if kiln is None:
            bad.append(name)
            print(f"| {name} | failed | - | - | {eager:.3f} | {graphs:.3f} | - |", flush=True)
            continue
        ms, e_cpu, e_torch = kiln
        if not e_cpu <= tolerance_of(args, name):
            bad.append(name)
        print(f"| {name} | {ms:.3f} | {e_cpu:.1e} | {e_torch:.1e} | {eager:.3f} | {graphs:.3f} | {ms / graphs:.2f} |",
              flush=True)
    if bad:
        limit = f"{args.tolerance:.0e}" if precision is None else "the bound stated for each"
        print(f"models failed or outside {limit} of kiln on the CPU: {', '.join(bad)}", file=sys.stderr)
    return 1 if bad else 0


# Long enough that the GEMMs outweigh the noise of the copies in and out
# (the one-GEMM chain's latency moved between 13 and 20 ms from run to run on
# the first GPU run, an H200: chains of 9 and of 65 read FP16 at 1249 and 1188
# TFLOP/s, above its peak). The program has no constants, so length costs
# nothing carried.
GEMM_CHAIN = 257
GEMM_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


def gemm_bundle(out, kiln, n):
    """Two programs for cuda:0,cpu: X (N x N, an input) multiplied by itself
    once, and GEMM_CHAIN times (Y = Y X): the difference of their latencies
    is GEMM_CHAIN - 1 GEMMs on the device, the copies in and out cancelling.
    No constants: the input is made where it runs."""
    import onnx
    from onnx import TensorProto, helper
    os.makedirs(out, exist_ok=True)
    for chain in (1, GEMM_CHAIN):
        nodes, y = [], "x"
        for i in range(chain):
            nodes.append(helper.make_node("MatMul", [y, "x"], [f"y{i}"]))
            y = f"y{i}"
        graph = helper.make_graph(nodes, f"gemm_chain_{chain}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
                                  [helper.make_tensor_value_info(y, TensorProto.FLOAT, [n, n])])
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "gemm.onnx")
            onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
            for precision in GEMM_PRECISIONS:
                subprocess.run([kiln, "plan", path, "-o", os.path.join(out, f"chain_{chain}_{precision}.kiln"),
                                "--target", "cuda:0,cpu", "--precision", precision], check=True,
                               stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump({"n": n, "chain": GEMM_CHAIN}, f)
    print(f"gemm: chains of 1 and {GEMM_CHAIN} GEMMs of {n} x {n} planned into {out}")


def gemm_run(args):
    """kiln's GEMM TFLOP/s in each precision from the two chains, beside torch.matmul in the same on the same GPU."""
    with open(os.path.join(args.bundle, "meta.json")) as f:
        meta = json.load(f)
    n, chain = meta["n"], meta["chain"]
    os.makedirs(args.workdir, exist_ok=True)
    rng = np.random.default_rng(7)
    (rng.standard_normal((n, n), dtype=np.float32) / np.sqrt(n)).astype(np.float32).tofile(
        os.path.join(args.workdir, "x.bin"))
    print(f"| GEMM {n}x{n}x{n} | TFLOP/s | how |")
    print("|---|---|---|", flush=True)
    flop = 2.0 * n ** 3 * (chain - 1)
    # kiln and torch.matmul row by row, per precision, so a step cut short
    # keeps the pairs it measured.
    for precision in GEMM_PRECISIONS:
        def kiln_tflops():
            ms = {c: runner_ms(args.runner, args.bundle, os.path.join(args.workdir, f"out_{c}"), args.runs,
                               f"chain_{c}_{precision}.kiln", (os.path.join(os.path.abspath(args.workdir), "x.bin"),))[0]
                  for c in (1, chain)}
            print(f"  kiln {precision}: chains of {chain} and 1: {ms[chain]:.3f} - {ms[1]:.3f} ms", file=sys.stderr)
            return flop / max(ms[chain] - ms[1], 1e-9) / 1e9
        label = f"kiln cuda:0 {precision.upper()}"
        how = f"{chain} GEMMs less 1: the copies cancel, up to their noise"
        print(f"| {label} | {torch_column(label, 'gemm', kiln_tflops):.1f} | {how} |", flush=True)
        if not args.no_torch:
            label = f"torch.matmul {precision.upper()}"
            print(f"| {label} | {torch_column(label, 'gemm', lambda: torch_tflops(n, precision)):.1f} | 20 calls |",
                  flush=True)
    return 0


def torch_tflops(n, precision):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)
    x = (torch.randn(n, n, device="cuda") / n ** 0.5).to(dtype)
    ms = torch_ms(lambda v: torch.matmul(v, v), x, 20)
    return 2.0 * n ** 3 / ms / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bundle")
    b.add_argument("--kiln", required=True)
    b.add_argument("--out", required=True)
    b.add_argument("--models", default=DEFAULT_MODELS)
    b.add_argument("--vulkan-models", default="", help="models also planned for vulkan:0,cpu (program_vulkan.kiln)")
    b.add_argument("--gemm", type=int, default=0, help="N: also the GEMM chains of N x N (gemm/)")
    b.add_argument("--keep", action="store_true", help="keep model.onnx, input.npy and cpu.kiln in the case folder")
    b.add_argument("--precisions", default="fp16,bf16",
                   help="also planned with --precision P (program_P.kiln), their bounds in meta.json")
    b.add_argument("--precision-models", default="mobilenet_v2:fp16,encoder_block",
                   help="the models planned in those precisions too; MODEL:P[:P] names its own")
    r = sub.add_parser("run")
    r.add_argument("--runner", required=True)
    r.add_argument("--bundle", required=True, help="the models folder of a bundle")
    r.add_argument("--runs", type=int, default=50)
    r.add_argument("--workdir", default="build/cuda_models")
    r.add_argument("--models", default="", help="default: every model in the bundle")
    r.add_argument("--no-torch", action="store_true")
    r.add_argument("--tolerance", type=float, default=1e-4,
                   help="largest error relative to kiln on the CPU (1e-4: FP32)")
    r.add_argument("--load-only", action="store_true", help="load and bind each program only (a dry run)")
    r.add_argument("--program", default="program.kiln",
                   help="program_vulkan.kiln: the Vulkan programs; program_fp16.kiln, program_bf16.kiln: 16-bit "
                        "storage, each checked against the bound its bundle states and PyTorch run in the same")
    r.add_argument("--device", default="cuda:0", help="the device named in the table")
    g = sub.add_parser("gemm")
    g.add_argument("--runner", required=True)
    g.add_argument("--bundle", required=True, help="the gemm folder of a bundle")
    g.add_argument("--runs", type=int, default=10)
    g.add_argument("--workdir", default="build/cuda_gemm")
    g.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    if args.command == "bundle":
        bundle(args)
        if args.gemm:
            gemm_bundle(os.path.join(os.path.dirname(os.path.abspath(args.out)), "gemm"), args.kiln, args.gemm)
        return 0
    if args.command == "gemm":
        return gemm_run(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
