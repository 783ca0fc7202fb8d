#!/usr/bin/env python3
"""One memory region against two on the Cortex-M build: the firmware
example's execute() counted in QEMU (mps2-an386, -icount shift=0: the guest
clock advances 1 ns per instruction, so SysTick counts instructions), and a
model of the cycles a board with a slow memory would spend.

  measured  instructions of execute(), from the image's SysTick ticks
            (ticks x 1e9 / core clock). QEMU models no memory timing: block
            RAM, SRAM and PSRAM all answer at once, so this figure is the
            same for one region and for two, and shows that the second
            region costs no instructions.
  modelled  instructions + WAIT_STATES x (bytes the run reads and writes in
            the slow region, kiln's traffic model) / 4: one 32-bit access
            per word, each WAIT_STATES cycles longer in the slow memory and
            none longer in the fast one. It leaves out caches, burst and
            unaligned accesses, bus contention, the stack and the constants
            read from flash.

The one-region image keeps every planned tensor in the slow memory (the
traffic of `--memory-region sram:64K:slow` alone); the two-region image puts
the planner's choice in 'fast' (block RAM) and the rest in the slow memory.

usage: firmware_cycles.py --kiln KILN --model firmware_cnn.onnx --one ONE.elf --two TWO.elf
                          [--wait-states N] [--qemu qemu-system-arm]
"""
import argparse
import json
import os
import re
import subprocess
import tempfile


def instructions(qemu, elf):
    out = subprocess.run([qemu, "-M", "mps2-an386", "-nographic", "-semihosting-config", "enable=on,target=native",
                          "-icount", "shift=0", "-kernel", elf], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"{elf} failed:\n{out.stdout}{out.stderr}")
    m = re.search(r"execute: (\d+) cycles of the (\d+) Hz core clock", out.stdout + out.stderr)
    return int(m.group(1)) * 1_000_000_000 // int(m.group(2))


def slow_traffic(kiln, model, regions):
    with tempfile.TemporaryDirectory() as d:
        args = [kiln, "plan", model, "-o", os.path.join(d, "p.kiln"), "--no-packing", "--report", d]
        for r in regions:
            args += ["--memory-region", r]
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(d, "plan.json")) as f:
            listed = json.load(f)["regions"]["list"]
    return sum(r["traffic"] for r in listed if r["speed"] != "fast")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--one", required=True)
    parser.add_argument("--two", required=True)
    parser.add_argument("--wait-states", type=int, default=4)
    parser.add_argument("--qemu", default="qemu-system-arm")
    args = parser.parse_args()
    rows = [("one region (sram, slow)", args.one, ["sram:64K:slow"]),
            ("two regions (fast 4K in block RAM, sram slow)", args.two, ["fast:4K:fast", "sram:64K:slow"])]
    print(f"| image | instructions (QEMU icount) | slow-region traffic (bytes) "
          f"| modelled cycles, {args.wait_states} wait states |")
    print("|---|---:|---:|---:|")
    for name, elf, regions in rows:
        n = instructions(args.qemu, elf)
        traffic = slow_traffic(args.kiln, args.model, regions)
        print(f"| {name} | {n:,} | {traffic:,} | {n + args.wait_states * traffic // 4:,} |")


if __name__ == "__main__":
    main()
