#!/usr/bin/env python3
"""kiln memplan and kiln plan --report: interval CSVs plan to valid offsets
at the lower bound where it is reachable, the figures are printed (and as
JSON), the plan file is written, reference offsets are checked, bad input
gives one clear line, and a planned model's report has plan.json and an SVG.

usage: memplan_test.py --kiln PATH/TO/kiln --workdir DIR
"""
import json
import os
import sys
import xml.dom.minidom

import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kiln_checks import expect, finish, run, test_args  # noqa: E402


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def valid(rows, offsets, inclusive=False):
    """No two buffers alive together share a byte; returns the arena."""
    end = (lambda r: r[2] + 1) if inclusive else (lambda r: r[2])
    for i, a in enumerate(rows):
        for j, b in enumerate(rows):
            if i < j and a[1] < end(b) and b[1] < end(a):
                oa, ob = offsets[a[0]], offsets[b[0]]
                if oa < ob + b[3] and ob < oa + a[3]:
                    return None
    return max(offsets[r[0]] + r[3] for r in rows)


def main():
    args = test_args()
    k, w = args.kiln, args.workdir

    # The TVM USMP 'simple' case (inclusive lifetimes): greedy by size needs
    # 220,192 bytes, the lower bound 216,096 is reachable.
    rows = [("0", 0, 23, 131072), ("1", 4, 5, 65568), ("2", 4, 9, 8192), ("3", 8, 30, 15360),
            ("4", 10, 11, 65568), ("5", 10, 15, 4096), ("6", 16, 17, 65552), ("7", 16, 21, 2048),
            ("8", 22, 23, 32784), ("9", 22, 27, 1024)]
    simple = os.path.join(w, "simple.csv")
    write(simple, "id,start_incl,end_incl,size\n" + "".join(f"{r[0]},{r[1]},{r[2]},{r[3]}\n" for r in rows))
    plan = os.path.join(w, "simple.plan.csv")
    rc, out, err = run(k, "memplan", simple, "-o", plan)
    expect("memplan prints the figures",
           rc == 0 and all(s in out for s in ("buffers:", "lower bound:", "naive:", "first fit:", "kiln:")), out + err)
    expect("memplan reads inclusive lifetimes from the header", "inclusive" in out, out)
    expect("memplan meets the lower bound", "216,096 bytes (1.0000 x LB)" in out.split("kiln:")[-1], out)
    offsets = {}
    if os.path.exists(plan):
        with open(plan) as f:
            lines = f.read().split()
        expect("plan file has a header and one row per buffer", lines[0] == "id,offset" and len(lines) == 11, lines)
        offsets = {line.split(",")[0]: int(line.split(",")[1]) for line in lines[1:]}
    expect("plan file offsets are a valid plan at the bound",
           len(offsets) == 10 and valid(rows, offsets, inclusive=True) == 216096, offsets)

    rc, out, err = run(k, "memplan", simple, "--json", "--algo", "first-fit")
    try:
        doc = json.loads(out)
        ok = doc["arena"] == doc["first_fit"] == 220192 and doc["lower_bound"] == 216096 and doc["buffers"] == 10
    except Exception:  # noqa: BLE001
        ok = False
    expect("memplan --json, first fit", rc == 0 and ok, out + err)
    rc, out, err = run(k, "memplan", simple, "--json", "--algo", "naive")
    expect("memplan naive: no reuse", rc == 0 and json.loads(out)["arena"] == sum(r[3] for r in rows), out + err)
    rc, out, err = run(k, "memplan", simple, "--json", "--alignment", "4096")
    try:
        doc = json.loads(out)
        ok = doc["arena"] % 4096 == 0 and doc["lower_bound"] % 4096 == 0
    except Exception:  # noqa: BLE001
        ok = False
    expect("memplan --alignment rounds sizes and offsets", rc == 0 and ok, out + err)

    # Half-open lifetimes with someone else's plan in a fifth column.
    theirs = os.path.join(w, "theirs.csv")
    write(theirs, "id,lower,upper,size,offset\na,0,2,100,0\nb,1,3,100,100\nc,2,4,100,200\n")
    rc, out, err = run(k, "memplan", theirs)
    expect("reference plan is checked and quoted",
           rc == 0 and "file's plan: 300 bytes (1.5000 x LB)" in out and "200 bytes (1.0000 x LB)" in out, out + err)
    write(theirs, "id,lower,upper,size,offset\na,0,2,100,0\nb,1,3,100,50\n")
    rc, out, err = run(k, "memplan", theirs)
    expect("an invalid reference plan is called invalid", rc == 0 and "invalid" in out and "overlap" in out, out + err)

    bad = os.path.join(w, "bad.csv")
    write(bad, "id,lower,upper,size\n0,0,2,10\n1,5,5,10\n")
    rc, out, err = run(k, "memplan", bad)
    expect("empty lifetime: one line naming file and line",
           rc == 1 and "bad.csv:3" in err and err.count("\n") == 1, err)
    rc, out, err = run(k, "memplan", os.path.join(w, "missing.csv"))
    expect("missing file: names it", rc == 1 and "missing.csv" in err, err)
    rc, out, err = run(k, "memplan", simple, "--algo", "magic")
    expect("unknown algorithm: names it", rc == 1 and "magic" in err, err)
    rc, out, err = run(k, "memplan")
    expect("no file: usage error", rc == 2, err)
    rc, out, err = run(k, "memplan", simple, "--time-limit", "-1")
    expect("negative time limit: usage error", rc == 2, err)

    # kiln plan --report on a small chain model.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 32])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"),
             helper.make_node("Sigmoid", ["a"], ["b"], name="s1"),
             helper.make_node("Add", ["a", "b"], ["c"], name="add1"),
             helper.make_node("Tanh", ["c"], ["d"], name="t1"),
             helper.make_node("Mul", ["c", "d"], ["y"], name="mul1")]
    graph = helper.make_graph(nodes, "g", [x], [y])
    model = os.path.join(w, "chain.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
    report = os.path.join(w, "report")
    rc, out, err = run(k, "plan", model, "-o", os.path.join(w, "chain.kiln"), "--report", report, "--plan-io",
                       "--compare-inplace")
    expect("plan --report succeeds and says where", rc == 0 and "plan.json" in out, out + err)
    expect("plan prints the peak and what is live there", "peak at instruction" in out and "live" in out, out)
    try:
        with open(os.path.join(report, "plan.json")) as f:
            doc = json.load(f)
        arena = doc["arenas"][0]
        tensors = {t["name"]: t for t in doc["tensors"]}
        ok = (all(key in arena for key in ("id", "size", "lower_bound", "device", "kind"))
              and arena["size"] >= arena["lower_bound"] > 0 and arena["device"] == "cpu:0"
              and all(key in t for t in doc["tensors"]
                      for key in ("name", "arena", "offset", "size", "first", "last", "alias_of", "device"))
              and "a" in tensors and tensors["a"]["first"] == 0 and tensors["a"]["last"] >= 2
              # c = a + b is written over a, which dies there: an alias whose
              # base's lifetime covers it.
              and tensors["c"]["alias_of"] == "a" and tensors["c"]["offset"] == tensors["a"]["offset"]
              and tensors["a"]["last"] >= tensors["c"]["last"])
        # No two tensors alive together share bytes (aliases share their base's).
        spans = [t for t in doc["tensors"] if t["alias_of"] is None]
        for i, a in enumerate(spans):
            for b in spans[i + 1:]:
                if a["first"] <= b["last"] and b["first"] <= a["last"]:
                    if a["offset"] < b["offset"] + b["size"] and b["offset"] < a["offset"] + a["size"]:
                        ok = False
        peak_ok = arena["peak_instruction"] >= 0 and len(arena["peak_tensors"]) >= 2
    except Exception as e:  # noqa: BLE001
        ok, peak_ok = False, False
        print(e)
    expect("plan.json has arenas and tensors with the documented keys, a valid plan", ok)
    expect("plan.json names the peak instruction and its tensors", peak_ok)
    try:
        svg = xml.dom.minidom.parse(os.path.join(report, "memory.svg"))
        titles = [t.firstChild.data for t in svg.getElementsByTagName("title")]
        ok = len(svg.getElementsByTagName("rect")) >= 5 and any(t.startswith("a\n") for t in titles)
    except Exception as e:  # noqa: BLE001
        ok = False
        print(e)
    expect("memory.svg parses, with a box and tooltip per tensor", ok)

    # In-place reuse in the report: which outputs alias which input, made by
    # which op, and the bytes saved against --no-inplace (planned, as asked).
    aliases = {a["name"]: a for a in doc.get("aliases", [])}
    inplace = doc.get("inplace", {})
    expect("plan.json lists the in-place alias c -> a made by Add",
           aliases.get("c", {}).get("base") == "a" and aliases["c"]["kind"] == "in_place"
           and aliases["c"]["op"] == "Add", doc.get("aliases"))
    expect("plan.json counts in-place outputs and the bytes saved",
           inplace.get("outputs_in_place", 0) >= 1 and inplace.get("bytes_saved", 0) > 0
           and inplace["arena_bytes"] + inplace["bytes_saved"] == inplace["arena_bytes_without_inplace"]
           and inplace.get("bytes_saved_measure") == "planned", inplace)
    report2 = os.path.join(w, "report_noinplace")
    rc, out, err = run(k, "plan", model, "-o", os.path.join(w, "chain2.kiln"), "--report", report2, "--plan-io",
                       "--no-inplace")
    with open(os.path.join(report2, "plan.json")) as f:
        doc2 = json.load(f)
    expect("--no-inplace: no aliases and nothing saved, the arena as big as the saving said",
           rc == 0 and doc2["aliases"] == [] and doc2["inplace"]["bytes_saved"] == 0
           and doc2["inplace"]["arena_bytes"] == inplace.get("arena_bytes_without_inplace"), doc2.get("inplace"))

    # Devices in the report: the chain on vulkan:0 with the Tanh kept on the
    # CPU gives two delegate calls and copies both ways.
    report3 = os.path.join(w, "report_vulkan")
    rc, out, err = run(k, "plan", model, "-o", os.path.join(w, "chain3.kiln"), "--report", report3,
                       "--target", "vulkan:0,cpu", "--place", "t1=cpu")
    try:
        with open(os.path.join(report3, "plan.json")) as f:
            doc3 = json.load(f)
        delegates = doc3["delegates"]
        copies = [(c["from"], c["to"], c["when"]) for c in doc3["copies"]]
        ok = (rc == 0 and doc3["devices"] == ["vulkan:0", "cpu:0"]
              and [d["kernels"] for d in delegates] == [["Relu", "Sigmoid", "Add"], ["Mul"]]
              and all(d["device"] == "vulkan:0" for d in delegates)
              and copies.count(("cpu:0", "vulkan:0", "run")) == 2 and copies.count(("vulkan:0", "cpu:0", "run")) == 2
              and all(c["bytes"] == 8 * 32 * 4 for c in doc3["copies"])
              and {t["device"] for t in doc3["tensors"]} == {"vulkan:0", "cpu:0"})
    except Exception as e:  # noqa: BLE001
        ok = False
        print(e)
    expect("plan.json lists devices, delegate calls and cross-device copies", ok, out + err)

    return finish()


if __name__ == "__main__":
    sys.exit(main())
