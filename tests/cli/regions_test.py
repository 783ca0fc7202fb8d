#!/usr/bin/env python3
"""Memory regions from the CLI: kiln plan --memory-region and
--memory-regions FILE give the same program; the summary, plan.json and
kiln inspect show each region's bytes and traffic; a region that overflows
is named with the bytes over and no file is left; bad specs exit 2; the
outputs are those of the one-arena plan; kiln pack gives each region a
buffer in the section named, and the source compiles.

usage: regions_test.py --kiln PATH/TO/kiln --workdir DIR
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kiln_checks import expect, finish, run, test_args  # noqa: E402


def chain_model(path):
    """e = exp(x) is read three times; the other tensors once (4 KiB each)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1024])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1024])
    nodes = [helper.make_node("Exp", ["x"], ["e"], name="exp"),
             helper.make_node("Tanh", ["e"], ["t"], name="tanh"),
             helper.make_node("Sigmoid", ["e"], ["s"], name="sigmoid"),
             helper.make_node("Add", ["t", "s"], ["a"], name="add"),
             helper.make_node("Mul", ["a", "e"], ["m"], name="mul"),
             helper.make_node("Neg", ["m"], ["y"], name="neg")]
    graph = helper.make_graph(nodes, "chain", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def check_plan(k, w, model):
    one = os.path.join(w, "one.kiln")
    rc, out, err = run(k, "plan", model, "-o", one)
    expect("plan without regions", rc == 0, out + err)
    program = os.path.join(w, "regions.kiln")
    report = os.path.join(w, "report")
    rc, out, err = run(k, "plan", model, "-o", program, "--memory-region", "tcm:4K:fast", "--memory-region",
                       "psram:1M:slow", "--report", report)
    expect("plan with two regions", rc == 0, out + err)
    expect("summary: a line per region", "region 'tcm' (fast, 4,096 bytes): arena 0" in out and
           "region 'psram' (slow, 1,048,576 bytes): arena 1" in out, out)
    traffic = re.search(r"traffic:\s+([\d,]+) bytes a run in the slow regions, against ([\d,]+)", out)
    expect("summary: slow traffic against everything there", traffic is not None, out)
    plan = json.load(open(os.path.join(report, "plan.json"))) if rc == 0 else {"regions": {"list": []}}
    regions = {r["name"]: r for r in plan["regions"]["list"]}
    expect("plan.json: both regions, within capacity",
           set(regions) == {"tcm", "psram"} and all(r["size"] <= r["capacity"] for r in regions.values()), str(regions))
    per_byte = {n: r["traffic"] / max(r["size"], 1) for n, r in regions.items()}
    expect("plan.json: more traffic per byte in the fast region than in the slow one",
           per_byte.get("tcm", 0) > per_byte.get("psram", 0) > 0, str(regions))
    if traffic:
        expect("plan.json and the summary agree",
               int(traffic.group(1).replace(",", "")) == regions["psram"]["traffic"] and
               int(traffic.group(2).replace(",", "")) == plan["regions"]["traffic_all_in_one"], out)
    svg = open(os.path.join(report, "memory.svg")).read() if rc == 0 else ""
    expect("memory.svg names the regions", "region &apos;tcm&apos;" in svg or "region 'tcm'" in svg, svg[:400])
    rc, out, err = run(k, "inspect", program, "--json")
    arenas = json.loads(out)["methods"][0]["arenas"] if rc == 0 else []
    expect("inspect: each arena's region", [a.get("region") for a in arenas] == ["tcm", "psram"], out[:600])
    # The file form gives the same program.
    regions_file = os.path.join(w, "regions.txt")
    with open(regions_file, "w") as f:
        f.write("# the board's memories\ntcm 4K fast\npsram:1M:slow   # external\n")
    from_file = os.path.join(w, "from_file.kiln")
    rc, out, err = run(k, "plan", model, "-o", from_file, "--memory-regions", regions_file)
    expect("--memory-regions FILE gives the same program",
           rc == 0 and open(from_file, "rb").read() == open(program, "rb").read(), out + err)
    # Same outputs as the one-arena plan.
    x = os.path.join(w, "x.npy")
    np.save(x, (np.arange(1024, dtype=np.float32) % 29) * 0.1 - 1.4)
    outs = []
    for p in (one, program):
        d = os.path.join(w, "out_" + os.path.basename(p))
        rc, out, err = run(k, "run", p, "--input", x, "--output-dir", d)
        outs.append(np.load(os.path.join(d, "output_0.npy")).tobytes() if rc == 0 else b"")
    expect("outputs bit-identical to the one-arena plan", outs[0] != b"" and outs[0] == outs[1])
    return program


def check_errors(k, w, model):
    target = os.path.join(w, "over.kiln")
    rc, out, err = run(k, "plan", model, "-o", target, "--memory-region", "tcm:4K:fast", "--memory-region",
                       "sram:4K")
    expect("overflow: exit 1 naming the region and the bytes over, no file",
           rc == 1 and "memory region 'sram' overflows" in err and "bytes over" in err and not os.path.exists(target),
           err)
    for spec in ("tcm", "tcm:12Q", "tcm:4K:warp", "t:cm:4K", ":4K", "tcm:0"):
        rc, out, err = run(k, "plan", model, "-o", target, "--memory-region", spec)
        expect(f"bad region '{spec}': exit 2 naming it", rc == 2 and spec in err, err)
    rc, out, err = run(k, "plan", model, "-o", target, "--memory-region", "a:4K", "--memory-region", "a:8K")
    expect("a region named twice: exit 2", rc == 2 and "named twice" in err, err)


def check_pack(k, w, program):
    out_dir = os.path.join(w, "packed")
    rc, out, err = run(k, "pack", program, "--c-array", "chain", "-o", out_dir, "--section", "tcm=.kiln_tcm")
    expect("pack with a section", rc == 0 and "region 'tcm'" in out, out + err)
    if rc != 0:
        return
    header = open(os.path.join(out_dir, "chain.h")).read()
    source = open(os.path.join(out_dir, "chain.c")).read()
    defines = {m.group(1): int(m.group(2)) for m in re.finditer(r"#define (\w+) (\d+)u", header)}
    rc, out, err = run(k, "inspect", program, "--json")
    arenas = json.loads(out)["methods"][0]["arenas"]
    expect("pack: each region's size is its arena's",
           defines.get("CHAIN_REGION_TCM_SIZE") == arenas[0]["size"] and
           defines.get("CHAIN_REGION_PSRAM_SIZE") == arenas[1]["size"], str(defines))
    expect("pack: the buffer in the section named, the other in .bss",
           '__attribute__((section(".kiln_tcm")))\n_Alignas(64) uint8_t chain_region_tcm[' in source and
           "\n_Alignas(64) uint8_t chain_region_psram[" in source, source[-600:])
    cc = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-c", "chain.c", "-o", "chain.o"],
                        cwd=out_dir, capture_output=True, text=True)
    expect("pack: the source compiles as C11", cc.returncode == 0, cc.stderr)
    if cc.returncode == 0:
        sections = subprocess.run(["objdump", "-h", os.path.join(out_dir, "chain.o")], capture_output=True,
                                  text=True).stdout
        size = re.search(r"\.kiln_tcm\s+([0-9a-f]+)", sections)
        expect("pack: the object has the section, the region's size",
               size is not None and int(size.group(1), 16) == arenas[0]["size"], sections)
    rc, out, err = run(k, "pack", program, "--c-array", "chain", "-o", out_dir, "--section", "dtcm=.x")
    expect("pack: a section for a region the program lacks: exit 1 naming it", rc == 1 and "'dtcm'" in err, err)
    rc, out, err = run(k, "pack", program, "--c-array", "chain", "-o", out_dir, "--section", "tcm")
    expect("pack: --section without =SECTION: exit 2", rc == 2 and "REGION=SECTION" in err, err)


def main():
    args = test_args()
    k, w = args.kiln, args.workdir
    model = os.path.join(w, "chain.onnx")
    chain_model(model)
    program = check_plan(k, w, model)
    check_errors(k, w, model)
    check_pack(k, w, program)
    sys.exit(finish())


if __name__ == "__main__":
    main()
