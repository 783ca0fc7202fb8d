#!/usr/bin/env python3
"""kiln and ONNX Runtime layer by layer: where one model's time goes in each.

Runs the program with `kiln run --profile` and the same ONNX model in ONNX
Runtime with ORT's own profiler (ort_runner.js with a profile prefix: one
intra-op thread by default, sequential, all graph optimizations), both on the same input, then
matches kiln's instructions to ORT's nodes by the ONNX node name each keeps
(kiln names a fused instruction by its anchor node, ORT a fused node by the
node it grew from) and prints, per node, the median over the runs of each
side's time and the ratio kiln / ORT, slowest first; then the time per kiln
op type against the ORT nodes it matched, and what each side spent in
nodes the other has no match for (ORT's layout reorders, kiln's copies).

Whole-model comparisons are bench_models.py's job: the profilers' own cost
is in these figures (ORT's is about 1-2 us a node, kiln's a clock read per
instruction), so the sums run a little above an unprofiled run's latency.

usage: profile_layers.py --kiln build/release/bin/kiln --ort-dir DIR
                         --model M.onnx [--program M.kiln] [--input X.npy]
                         [--runs 20] [--threads 1] [--isa auto] [--cpus 0]
                         [--top 25] [--workdir DIR] [--json OUT.json]

Without --program the model is planned with `kiln plan` into --workdir;
without --input the input is drawn from N(0, 1) with the model's input
shape (seed 0).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_models  # noqa: E402


def model_input_shape(model_path):
    model = onnx.load(model_path, load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if len(inputs) != 1:
        sys.exit(f"profile_layers: {model_path} has {len(inputs)} graph inputs; this tool takes one")
    dims = [d.dim_value for d in inputs[0].type.tensor_type.shape.dim]
    if not all(dims):
        sys.exit(f"profile_layers: {model_path}: input shape {dims} is not fully static")
    return dims


def kiln_layers(args, program, input_npy, workdir):
    trace = os.path.join(workdir, "kiln.trace")
    chrome = os.path.join(workdir, "kiln_trace.json")
    run = [args.kiln, "run", program, "--input", input_npy, "--runs", str(args.runs),
           "--threads", str(args.threads), "--huge-pages", "off", f"--profile={trace}"]
    if args.isa != "auto":
        run += ["--isa", args.isa]
    subprocess.run(run, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([args.kiln, "profile", trace, "--program", program, "--chrome", chrome],
                   check=True, stdout=subprocess.DEVNULL)
    with open(chrome) as f:
        events = json.load(f)["traceEvents"]
    nodes = {}
    for e in events:
        if e.get("cat") != "kernel":
            continue
        name = e["args"].get("node") or f"#{e['args']['instruction']}"
        entry = nodes.setdefault(name, {"op": e["name"], "ms": {}, "order": len(nodes)})
        # Several instructions can carry one node (a split or a copy): sum them per run.
        runs = entry["ms"]
        key = e["args"]["instruction"]
        runs.setdefault(key, []).append(e["dur"] / 1000.0)
    for entry in nodes.values():
        per_instruction = [statistics.median(v) for v in entry["ms"].values()]
        entry["median_ms"] = sum(per_instruction)
    return nodes


def ort_layers(args, model, input_npy, workdir):
    x = np.load(input_npy).astype(np.float32)
    raw = os.path.join(workdir, "input.bin")
    x.tofile(raw)
    env = dict(os.environ, NODE_PATH=os.path.join(args.ort_dir, "node_modules"))
    out = subprocess.run(["node", os.path.join(HERE, "ort_runner.js"), model, raw,
                          "x".join(str(d) for d in x.shape), str(args.runs), os.path.join(workdir, "ort_out.bin"),
                          str(args.threads), "all", os.path.join(workdir, "ort_profile")],
                         check=True, capture_output=True, text=True, env=env)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    nodes = result["nodes"]
    for order, entry in enumerate(nodes.values()):  # in the order ORT first ran them
        entry["median_ms"] = statistics.median(entry["ms"])
        entry["order"] = order
    return nodes, result["version"]


def onnx_graph(model_path):
    """The model's nodes in graph (topological) order, each with its inputs and first output."""
    model = onnx.load(model_path, load_external_data=False)
    constants = {i.name for i in model.graph.initializer}
    nodes = []
    for n in model.graph.node:
        nodes.append({"name": n.name or n.output[0], "inputs": [i for i in n.input if i and i not in constants],
                      "output": n.output[0] if n.output else ""})
    return nodes


def group_layers(graph, kiln, ort):
    """Groups that both sides ran as a whole: each ONNX node is attributed to the kiln
    instruction that ran it (named by its anchor, the first node it fuses) and to the ORT
    node that ran it (named by its own node or, in ORT's NCHWc layout, by the tensor it
    writes, the last node it fuses); instructions and nodes sharing an ONNX node join one
    group, so a fused Conv+Add+Relu in ORT is compared with kiln's Conv and Add together."""
    producer = {n["output"]: n["name"] for n in graph}
    consumers = {}
    for n in graph:
        for i in n["inputs"]:
            consumers.setdefault(i, []).append(n["name"])
    names = {n["name"] for n in graph}

    def ort_node_of(ort_name):
        if ort_name in names:
            return ort_name
        tensor = ort_name[:-len("_nchwc")] if ort_name.endswith("_nchwc") else ort_name
        return producer.get(tensor)

    ort_owner = {}
    for ort_name in ort:
        node = ort_node_of(ort_name)
        if node:
            ort_owner[node] = ort_name
    kiln_owner = {}
    for n in graph:  # a node kiln fused into an instruction follows its first input's producer
        if n["name"] in kiln:
            kiln_owner[n["name"]] = n["name"]
        elif n["inputs"] and producer.get(n["inputs"][0]) in kiln_owner:
            kiln_owner[n["name"]] = kiln_owner[producer[n["inputs"][0]]]
    for n in reversed(graph):  # a node ORT fused follows its only consumer
        if n["name"] not in ort_owner:
            after = consumers.get(n["output"], [])
            if len(after) == 1 and after[0] in ort_owner:
                ort_owner[n["name"]] = ort_owner[after[0]]
    for n in graph:  # else (a Conv named by its own output that took in the Add after it) its input's
        if n["name"] not in ort_owner:
            owned = [producer[i] for i in n["inputs"] if producer.get(i) in ort_owner]
            if owned:
                ort_owner[n["name"]] = ort_owner[owned[0]]

    parent = {}

    def find(key):
        parent.setdefault(key, key)
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for name in kiln:
        find(("kiln", name))
    for name in ort:
        find(("ort", name))
    for n in graph:
        if n["name"] in kiln_owner and n["name"] in ort_owner:
            parent[find(("kiln", kiln_owner[n["name"]]))] = find(("ort", ort_owner[n["name"]]))
    groups = {}
    for key in parent:
        groups.setdefault(find(key), {"kiln": [], "ort": []})[key[0]].append(key[1])
    return list(groups.values())


def side_summary(group, table):
    ms = sum(table[n]["median_ms"] for n in group)
    ops = "+".join(dict.fromkeys(table[n]["op"] for n in sorted(group, key=lambda n: table[n]["order"])))
    return ms, ops


def print_tables(groups, kiln, ort, top, version):
    both = [g for g in groups if g["kiln"] and g["ort"]]
    rows = []
    for g in both:
        k, k_ops = side_summary(g["kiln"], kiln)
        o, o_ops = side_summary(g["ort"], ort)
        first = min(g["kiln"], key=lambda n: kiln[n]["order"])  # kiln's first instruction of the layer
        label = first + (f" (+{len(g['kiln']) - 1})" if len(g["kiln"]) > 1 else "")
        rows.append((label, k_ops, k, o_ops, o))
    rows.sort(key=lambda r: -r[2])
    print(f"\nper layer, median of the runs (ONNX Runtime {version}), slowest in kiln first;")
    print("a layer is what both ran as a whole, named by kiln's first instruction (+ its others):")
    print(f"{'layer':<50} {'kiln':<18}{'kiln ms':>9}  {'ORT':<18}{'ORT ms':>9}{'kiln/ORT':>10}")
    for label, k_ops, k, o_ops, o in rows[:top]:
        ratio = k / o if o > 0 else float("inf")
        print(f"{label[-50:]:<50} {k_ops[:17]:<18}{k:9.3f}  {o_ops[:17]:<18}{o:9.3f}{ratio:10.2f}")
    if len(rows) > top:
        print(f"... {len(rows) - top} more layers (--top)")

    by_op = {}
    for _, k_ops, k, _, o in rows:
        entry = by_op.setdefault(k_ops, [0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += k
        entry[2] += o
    print("\nper kiln op (or fused ops), against ORT on the same layers:")
    print(f"{'kiln':<24}{'layers':>7}{'kiln ms':>10}{'ORT ms':>10}{'kiln/ORT':>10}")
    for op, (count, k, o) in sorted(by_op.items(), key=lambda kv: -kv[1][1]):
        print(f"{op[:23]:<24}{count:7d}{k:10.3f}{o:10.3f}{k / o if o else float('inf'):10.2f}")

    k_matched = sum(r[2] for r in rows)
    o_matched = sum(r[4] for r in rows)
    print(f"\nlayers both ran: {len(rows)}; kiln {k_matched:.3f} ms, ORT {o_matched:.3f} ms, "
          f"kiln/ORT {k_matched / o_matched if o_matched else float('inf'):.2f}")
    for side, table in (("kiln", kiln), ("ORT", ort)):
        names = [n for g in groups if not (g["kiln"] and g["ort"]) for n in g[side.lower()]]
        spent = sum(table[n]["median_ms"] for n in names)
        ops = {}
        for n in names:
            ops[table[n]["op"]] = ops.get(table[n]["op"], 0.0) + table[n]["median_ms"]
        detail = ", ".join(f"{op} {ms:.3f}" for op, ms in sorted(ops.items(), key=lambda kv: -kv[1]))
        print(f"only in {side}: {len(names)} nodes, {spent:.3f} ms" + (f" ({detail})" if detail else ""))
    k_total = sum(e["median_ms"] for e in kiln.values())
    o_total = sum(e["median_ms"] for e in ort.values())
    print(f"sum of all nodes: kiln {k_total:.3f} ms, ORT {o_total:.3f} ms, "
          f"kiln/ORT {k_total / o_total if o_total else float('inf'):.2f}")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--ort-dir", default=HERE,
                        help="directory whose node_modules holds onnxruntime-node")
    parser.add_argument("--model", required=True, help="the ONNX model")
    parser.add_argument("--program", help="its kiln program (planned here if absent)")
    parser.add_argument("--input", help="an .npy input (N(0, 1) of the input's shape if absent)")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--isa", default="auto", help="kiln run --isa (ORT takes its own best path)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--workdir", help="where to keep the traces (a temporary directory if absent)")
    parser.add_argument("--json", help="also write the per-layer medians of both sides here")
    bench_models.add_cpus_option(parser)
    args = parser.parse_args()
    if args.runs < 1 or args.threads < 1:
        parser.error("--runs and --threads take positive counts")
    if not os.path.isfile(os.path.join(args.ort_dir, "node_modules", "onnxruntime-node", "package.json")):
        parser.error(f"no onnxruntime-node under {args.ort_dir}/node_modules: "
                     "npm i --ignore-scripts onnxruntime-node there, or name it with --ort-dir")
    bench_models.pin_cpus(parser, args)

    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or scratch
        os.makedirs(workdir, exist_ok=True)
        program = args.program
        if not program:
            program = os.path.join(workdir, os.path.basename(args.model).rsplit(".", 1)[0] + ".kiln")
            subprocess.run([args.kiln, "plan", args.model, "-o", program], check=True,
                           stdout=subprocess.DEVNULL)
        input_npy = args.input
        if not input_npy:
            input_npy = os.path.join(workdir, "input.npy")
            shape = model_input_shape(args.model)
            np.save(input_npy, np.random.default_rng(0).standard_normal(shape).astype(np.float32))
        kiln = kiln_layers(args, program, input_npy, workdir)
        ort, version = ort_layers(args, args.model, input_npy, workdir)
        rows = print_tables(group_layers(onnx_graph(args.model), kiln, ort), kiln, ort, args.top, version)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"layers": [{"layer": r[0], "kiln": r[1], "kiln_ms": r[2], "ort": r[3], "ort_ms": r[4]}
                                      for r in rows],
                           "ort_version": version, "runs": args.runs, "threads": args.threads},
                          f, indent=1)


if __name__ == "__main__":
    main()
