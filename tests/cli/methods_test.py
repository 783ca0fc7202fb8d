#!/usr/bin/env python3
"""Several methods in one program (`kiln plan --method NAME=MODEL.onnx`):

  - an encoder/decoder pair and a GPT's prefill/decode pair
    (tests/models/method_models.py) plan into one program each; every
    method runs by name (`kiln run --method`) and gives PyTorch's outputs;
  - the decode step, given the key and value cache prefill returned, gives
    the logits of the whole sequence's last position;
  - byte-identical constants are stored once: the pair's data segment is
    smaller than the two methods' planned alone together;
  - the methods form one arena group: `kiln inspect` lists both and the
    group, whose one buffer is the larger method's host arenas; through the
    C API both methods load into that one buffer and each stays right when
    the other ran in between (tests/capi/methods_test.c);
  - two programs planned apart share one buffer the same way: `kiln pack
    --shared-arena` sizes it (the larger method's host arenas);
  - --concurrent-methods leaves the group out; a method named twice, or
    --method beside a positional model, is a usage error.

    methods_test.py --kiln KILN --capi-test CAPI_METHODS_TEST --workdir DIR
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from kiln_checks import expect, finish, run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PAIRS = {"encdec": ("encoder", "decoder"), "gpt": ("prefill", "decode")}
INPUTS = {"encoder": 1, "decoder": 2, "prefill": 1, "decode": 3}


def kiln(args, *argv):
    status, out, err = run(args.kiln, *argv)
    return status, out + err


def inspect_json(args, program):
    status, out, _ = run(args.kiln, "inspect", program, "--json")
    return json.loads(out) if status == 0 else {}


def close(got, want, tolerance=1e-4):
    scale = max(float(np.max(np.abs(want))), 1e-30)
    return got.shape == want.shape and float(np.max(np.abs(got - want))) / scale <= tolerance


def run_method(args, program, method, inputs, out_dir):
    """Runs `method` on the .npy files `inputs`; its outputs, or None."""
    argv = ["run", program, "--method", method, "--output-dir", out_dir]
    for path in inputs:
        argv += ["--input", path]
    status, out = kiln(args, *argv)
    if status != 0:
        print(out)
        return None
    outputs = []
    while os.path.exists(os.path.join(out_dir, f"output_{len(outputs)}.npy")):
        outputs.append(np.load(os.path.join(out_dir, f"output_{len(outputs)}.npy")))
    return outputs


def plan_pair(args, pair, name, extra=()):
    work, models = args.workdir, os.path.join(args.workdir, "models")
    program = os.path.join(work, name + ".kiln")
    argv = ["plan", "-o", program, *extra]
    for method in PAIRS[pair]:
        argv += ["--method", f"{method}={os.path.join(models, method + '.onnx')}"]
    status, out = kiln(args, *argv)
    return status, out, program


def check_pair(args, pair):
    models = os.path.join(args.workdir, "models")
    report = os.path.join(args.workdir, pair + "_report")
    status, out, program = plan_pair(args, pair, pair, ("--report", report))
    if not expect(f"{pair}: kiln plan --method plans both", status == 0, out):
        return
    plan = json.load(open(os.path.join(report, "plan.json")))
    expect(f"{pair}: the summary names the shared buffer", "never run at the same time" in out, out)
    alone = {}
    for method in PAIRS[pair]:
        path = os.path.join(args.workdir, method + ".kiln")
        kiln(args, "plan", os.path.join(models, method + ".onnx"), "-o", path)
        alone[method] = inspect_json(args, path)
    both = inspect_json(args, program)
    segments = [alone[m]["segment_bytes"] for m in PAIRS[pair]]
    print(f"{pair}: data segment {both['segment_bytes']} bytes together, {segments} alone")
    expect(f"{pair}: identical constants stored once", both["segment_bytes"] < sum(segments), segments)
    groups = both.get("arena_groups", [])
    expect(f"{pair}: one arena group of both methods", len(groups) == 1 and groups[0]["methods"] == [0, 1], groups)
    sizes = [sum(a["size"] for a in alone[m]["methods"][0]["arenas"]) for m in PAIRS[pair]]
    print(f"{pair}: shared host buffer {groups[0]['host_bytes'] if groups else '?'} bytes, alone {sizes}")
    expect(f"{pair}: the buffer is the larger plan's", groups and groups[0]["host_bytes"] == max(sizes), sizes)
    expect(f"{pair}: plan.json names the group and its buffer",
           plan.get("arena_groups") == [{"methods": list(PAIRS[pair]), "host_bytes": max(sizes)}],
           plan.get("arena_groups"))
    status, text = kiln(args, "inspect", program)
    expect(f"{pair}: kiln inspect lists the methods and the group",
           all(f"'{m}'" in text.split("\n\n")[0] for m in PAIRS[pair]) and "arena group:" in text, text[:2000])
    for method in PAIRS[pair]:
        inputs = [os.path.join(models, f"{method}_in{i}.npy") for i in range(INPUTS[method])]
        got = run_method(args, program, method, inputs, os.path.join(args.workdir, f"{pair}_{method}_out"))
        want = [np.load(os.path.join(models, f"{method}_out{i}.npy")) for i in range(3)
                if os.path.exists(os.path.join(models, f"{method}_out{i}.npy"))]
        expect(f"{pair}: method '{method}' by name gives PyTorch's outputs",
               got is not None and len(got) == len(want) and all(close(g, w) for g, w in zip(got, want)))
    check_capi(args, pair, program)


def check_cache(args):
    """Decode fed the cache prefill wrote gives the whole sequence's last logits."""
    models, work = os.path.join(args.workdir, "models"), args.workdir
    program = os.path.join(work, "gpt.kiln")
    cache = run_method(args, program, "prefill", [os.path.join(models, "prefill_in0.npy")],
                       os.path.join(work, "cache"))
    if not expect("gpt: prefill returns logits and the cache", cache is not None and len(cache) == 3):
        return
    got = run_method(args, program, "decode", [os.path.join(models, "decode_in0.npy"),
                                                os.path.join(work, "cache", "output_1.npy"),
                                                os.path.join(work, "cache", "output_2.npy")],
                     os.path.join(work, "step"))
    want = np.load(os.path.join(models, "full_last_logits.npy"))
    expect("gpt: decode after prefill gives the whole sequence's last logits",
           got is not None and close(got[0], want), None if got is None else float(np.max(np.abs(got[0] - want))))


def raw(path):
    out = path[:-4] + ".bin"
    np.load(path).tofile(out)
    return out


def check_capi(args, pair, program):
    models = os.path.join(args.workdir, "models")
    argv = [args.capi_test, program]
    for method in PAIRS[pair]:
        argv.append(method)
        argv += [raw(os.path.join(models, f"{method}_in{i}.npy")) for i in range(INPUTS[method])]
        argv.append(raw(os.path.join(models, f"{method}_out0.npy")))
    p = subprocess.run(argv, capture_output=True, text=True)
    print(p.stdout.strip().splitlines()[-2] if p.stdout.strip() else "")
    expect(f"{pair}: both methods run from one shared buffer (C API)", p.returncode == 0, p.stdout + p.stderr)


def check_options(args):
    status, out, program = plan_pair(args, "encdec", "concurrent", ("--concurrent-methods",))
    expect("--concurrent-methods: no arena group", status == 0 and "arena_groups" not in inspect_json(args, program),
           out)
    models = os.path.join(args.workdir, "models")
    enc = os.path.join(models, "encoder.onnx")
    status, out = kiln(args, "plan", "-o", os.path.join(args.workdir, "x.kiln"), "--method", f"a={enc}", "--method",
                       f"a={enc}")
    expect("a method named twice is a usage error", status == 2 and "named twice" in out, out)
    status, out = kiln(args, "plan", enc, "-o", os.path.join(args.workdir, "x.kiln"), "--method", f"a={enc}")
    expect("--method beside a positional model is a usage error", status == 2, out)
    status, out = kiln(args, "plan", "-o", os.path.join(args.workdir, "x.kiln"), "--method", "a")
    expect("--method without =MODEL is a usage error", status == 2 and "NAME=MODEL" in out, out)


def check_pack_shared(args):
    """kiln pack --shared-arena over two programs planned apart: the header's
    buffer is the larger method's host arenas, not the sum."""
    work = args.workdir
    programs = [os.path.join(work, m + ".kiln") for m in ("encoder", "decoder")]
    status, out = kiln(args, "pack", *programs, "--shared-arena", "enc_dec_arena", "-o", os.path.join(work, "pack"))
    sizes = [sum(a["size"] for a in inspect_json(args, p)["methods"][0]["arenas"]) for p in programs]
    header = os.path.join(work, "pack", "enc_dec_arena.h")
    text = open(header).read() if os.path.exists(header) else ""
    expect("kiln pack --shared-arena: one buffer, the larger program's",
           status == 0 and f"#define ENC_DEC_ARENA_BYTES {max(sizes)}u" in text, out + text)
    both = inspect_json(args, os.path.join(work, "gpt.kiln"))
    status, out = kiln(args, "pack", os.path.join(work, "gpt.kiln"), "--c-array", "gpt", "-o", os.path.join(work, "pack"))
    header = os.path.join(work, "pack", "gpt.h")
    text = open(header).read() if os.path.exists(header) else ""
    shared = both.get("arena_groups", [{}])[0].get("host_bytes")
    expect("kiln pack of a program with an arena group gives each method the shared buffer's bytes",
           status == 0 and all(f"#define GPT_{m}_SHARED_ARENA_BYTES {shared}u" in text for m in ("PREFILL", "DECODE")),
           out + text)
    status, out = kiln(args, "pack", *programs, "--shared-arena", "9x", "-o", os.path.join(work, "pack"))
    expect("kiln pack --shared-arena refuses a name that is not a C identifier", status == 2, out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--capi-test", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    subprocess.run([sys.executable, os.path.join(HERE, "..", "models", "method_models.py"),
                    os.path.join(args.workdir, "models")], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    for pair in PAIRS:
        check_pair(args, pair)
    check_cache(args)
    check_pack_shared(args)
    check_options(args)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
