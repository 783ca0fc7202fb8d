#!/usr/bin/env python3
"""The command reference (docs/cli.md) must be what `kiln <command> --help` prints.

    readme_help.py --kiln KILN [--update]

docs/cli.md holds, for every subcommand, a block
    <!-- help: NAME -->
    ```text
    ...
    ```
with the command's --help text, less what depends on the build (the lines
from "targets built in:" or "backends built in:" on). Without --update the
test fails on any difference and prints it; --update rewrites the blocks.
"""
import argparse
import difflib
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMANDS = ["plan", "run", "inspect", "verify", "pack", "memplan", "profile", "bench", "quantize"]
PAGE = "docs/cli.md"
BLOCK = re.compile(r"<!-- help: (\w+) -->\n```text\n(.*?)```\n", re.S)


def help_text(kiln, command):
    out = subprocess.run([kiln, command, "--help"], stdout=subprocess.PIPE, text=True, check=True).stdout
    lines = []
    for line in out.splitlines():
        if line.startswith("targets built in:") or line.startswith("backends built in:"):
            break
        lines.append(line.rstrip())
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--update", action="store_true")
    args = parser.parse_args()
    path = os.path.join(ROOT, PAGE)
    page = open(path).read()
    found = {m.group(1): m.group(2) for m in BLOCK.finditer(page)}
    missing = [c for c in COMMANDS if c not in found]
    if missing and not args.update:
        print(f"{PAGE} has no help block for: " + ", ".join(missing))
        return 1
    if args.update:
        page = BLOCK.sub(lambda m: f"<!-- help: {m.group(1)} -->\n```text\n{help_text(args.kiln, m.group(1))}```\n",
                           page)
        open(path, "w").write(page)
        print(f"{PAGE}'s help blocks updated")
        return 0
    bad = 0
    for command in COMMANDS:
        want = help_text(args.kiln, command)
        if found[command] != want:
            bad += 1
            print(f"{PAGE}'s block for `kiln {command} --help` differs from the tool:")
            sys.stdout.writelines(difflib.unified_diff(found[command].splitlines(True), want.splitlines(True),
                                                       PAGE, f"kiln {command} --help"))
    if bad:
        print(f"{bad} block(s) out of date: run tests/cli/readme_help.py --kiln KILN --update")
        return 1
    print(f"{PAGE}'s reference matches --help for {len(COMMANDS)} commands")
    return 0


if __name__ == "__main__":
    sys.exit(main())
