#!/usr/bin/env python3
"""Size report of a firmware build: .text, .rodata, .data and .bss of

  - the core runtime linked alone (the core probe image: runtime, platform
    layer, start-up code and the libc/libgcc functions they call; no kernel,
    no model) -- what every kiln firmware pays;
  - the core runtime's object files (all of them, before the link drops
    what nobody calls);
  - each object file of the CPU kernels;
  - whole images (the example).

Where the linked core's bytes come from (runtime, platform layer, start-up
code, libc, libgcc) is read from its link map, when one lies beside it.

Sizes come from `arm-none-eabi-size -A`. Sections are grouped as .text
(code, vector table, veneers), .rodata (constants, the ARM unwind index,
init arrays), .data and .bss; the stack reservation and debug sections are
left out. Prints a Markdown table.

With --max-core-text N it is also the size gate: exits 3 (not 1, which a
crash gives) when the linked core runtime's .text is larger than N bytes;
--max-image-text N does the same for every --image.

With --test-data SYMBOL (repeatable; read with --nm), it also gives each
image's flash (.text + .rodata) less those symbols: data that only the
image's own check reads (the bundled self-test, the input and the expected
outputs), which an application would not carry.
"""
import argparse
import os
import re
import subprocess
import sys

COLUMNS = (".text", ".rodata", ".data", ".bss")


def group_of(section):
    if section.startswith((".text", ".vectors", ".glue_7", ".vfp11_veneer", ".v4_bx")):
        return ".text"
    if section.startswith((".rodata", ".ARM.exidx", ".ARM.extab", ".init_array", ".fini_array",
                           ".preinit_array")):
        return ".rodata"
    if section.startswith(".data"):
        return ".data"
    if section.startswith(".bss") or section == "COMMON":
        return ".bss"
    return None


def sizes(size_tool, path):
    """{member: {group: bytes}} for an archive; {basename: ...} for one file."""
    output = subprocess.run([size_tool, "-A", path], check=True, capture_output=True, text=True).stdout
    result = {}
    current = None
    for line in output.splitlines():
        header = re.match(r"^(\S+?)\s*(?:\(ex .*\))?\s*:$", line)
        if header:
            current = result.setdefault(os.path.basename(header.group(1)), dict.fromkeys(COLUMNS, 0))
            continue
        row = re.match(r"^(\S+)\s+(\d+)\s+\d+$", line)
        if row and current is not None:
            group = group_of(row.group(1))
            if group:
                current[group] += int(row.group(2))
    return result


def map_breakdown(map_path):
    """{input file: {group: bytes}} from a GNU ld link map: the input
    sections the link kept, by the archive (or object) they came from."""
    with open(map_path) as f:
        text = f.read()
    text = text[text.find("Linker script and memory map"):]
    result = {}
    # " .text.name  0xADDRESS  0xSIZE  path/lib.a(member.o)"; a long section
    # name puts the rest on the next line.
    for m in re.finditer(r"^ (\.\S+|COMMON)\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S+)$", text, re.M):
        group = group_of(m.group(1))
        if group:
            source = os.path.basename(re.sub(r"\(.*\)$", "", m.group(3)))
            source = re.sub(r"\.(cc|c)\.(o|obj)$", "", source)
            # Link-time optimisation compiles the kiln code of the image
            # (runtime, platform layer, start-up code, the image's own) into
            # partitions with temporary names: one row for all of them.
            if re.search(r"\.ltrans\d*\.ltrans\.o$", source):
                source = "kiln code, optimised at link time"
            figures = result.setdefault(source, dict.fromkeys(COLUMNS, 0))
            figures[group] += int(m.group(2), 16)
    return result


def symbol_bytes(nm_tool, path, names):
    """The summed sizes of the symbols of `path` named in `names` (demangled)."""
    output = subprocess.run([nm_tool, "-S", "-C", path], check=True, capture_output=True, text=True).stdout
    found = {}
    for line in output.splitlines():
        m = re.match(r"^[0-9a-f]+ ([0-9a-f]+) \S (.+)$", line)
        if m and m.group(2) in names:
            found[m.group(2)] = int(m.group(1), 16)
    return sum(found.values()), sorted(found)


def total(parts):
    out = dict.fromkeys(COLUMNS, 0)
    for part in parts:
        for column in COLUMNS:
            out[column] += part[column]
    return out


def row(name, figures):
    return "| " + name + " | " + " | ".join(f"{figures[c]:,}" for c in COLUMNS) + " |"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="arm-none-eabi-size")
    parser.add_argument("--cpu", default="?")
    parser.add_argument("--core-image", required=True)
    parser.add_argument("--core-library", action="append", default=[])
    parser.add_argument("--kernel-library", action="append", default=[])
    parser.add_argument("--image", action="append", default=[], help="LABEL=ELF")
    parser.add_argument("--max-core-text", type=int)
    parser.add_argument("--max-image-text", type=int)
    parser.add_argument("--nm", default="arm-none-eabi-nm")
    parser.add_argument("--test-data", action="append", default=[], help="SYMBOL of an image's self-check data")
    args = parser.parse_args()

    core = next(iter(sizes(args.size, args.core_image).values()))
    lines = [f"Firmware sizes in bytes ({args.cpu}, -Os, newlib-nano):", "",
             "| part | " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * len(COLUMNS),
             row("core runtime, linked alone (core probe image)", core)]
    if args.core_library:
        objects = [figures for lib in args.core_library for figures in sizes(args.size, lib).values()]
        lines.append(row("core runtime, all object files (before --gc-sections)", total(objects)))
    for lib in args.kernel_library:
        kernels = sizes(args.size, lib)
        for member, figures in sorted(kernels.items()):
            lines.append(row("kernel " + re.sub(r"\.(cc|cpp)\.(o|obj)$", ".cc", member), figures))
        lines.append(row("kernels, all object files", total(kernels.values())))
    image_text = {}
    flash_rows = []
    for image in args.image:
        label, _, path = image.partition("=")
        figures = next(iter(sizes(args.size, path).values()))
        image_text[label] = figures[".text"]
        lines.append(row(label, figures))
        if args.test_data:
            flash = figures[".text"] + figures[".rodata"]
            data, found = symbol_bytes(args.nm, path, set(args.test_data))
            flash_rows.append(f"| {label} | {flash:,} | {data:,} ({', '.join(found) or 'none'}) | {flash - data:,} |")
    if flash_rows:
        lines += ["", "Flash (.text + .rodata) less the data only the image's own check reads:", "",
                  "| image | flash | test data | flash less test data |", "|---|---:|---|---:|"] + flash_rows
    core_map = os.path.splitext(args.core_image)[0] + ".map"
    if os.path.exists(core_map):
        lines += ["", "The linked core runtime by where its bytes come from:", "",
                  "| from | " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * len(COLUMNS)]
        for source, figures in sorted(map_breakdown(core_map).items(), key=lambda kv: -kv[1][".text"]):
            lines.append(row(source, figures))
    print("\n".join(lines))

    if args.max_core_text is not None:
        text = core[".text"]
        verdict = "within" if text <= args.max_core_text else "OVER"
        print(f"\nsize gate: core runtime .text {text:,} bytes, {verdict} the limit of {args.max_core_text:,}")
        if text > args.max_core_text:
            return 3
    if args.max_image_text is not None:
        for label, text in image_text.items():
            verdict = "within" if text <= args.max_image_text else "OVER"
            print(f"\nsize gate: {label} .text {text:,} bytes, {verdict} the limit of {args.max_image_text:,}")
            if text > args.max_image_text:
                return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
