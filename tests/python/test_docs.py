"""docs/python.md runs: every ```python block, in order, in one namespace,
in a fresh directory; a ```text block right after one must match what it
printed, line by line, up to a line "..." (the rest varies)."""
import contextlib
import io
import os
import pathlib
import re

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def blocks():
    text = PAGE.read_text()
    found = [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1) for m in BLOCK.finditer(text)]
    return found


def expect_printed(printed, expected, line):
    got = printed.splitlines()
    for i, want in enumerate(expected.splitlines()):
        if want == "...":
            return
        assert i < len(got) and got[i] == want, f"docs/python.md:{line}: printed {got!r}, the page says {want!r}"
    assert len(got) == len(expected.splitlines()), f"docs/python.md:{line}: printed more than the page shows"


def test_the_python_page_runs(tmp_path):
    found = blocks()
    assert sum(1 for kind, _, _ in found if kind == "python") >= 8
    namespace = {"__name__": "__docs__"}
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for i, (kind, code, line) in enumerate(found):
            if kind != "python":
                continue
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"docs/python.md:{line}", "exec"), namespace)
            if i + 1 < len(found) and found[i + 1][0] == "text":
                expect_printed(out.getvalue(), found[i + 1][1], line)
    finally:
        os.chdir(cwd)
