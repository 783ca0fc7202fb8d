#!/usr/bin/env python3
"""layering.function_size: no product function is longer than 120 lines,
nor 75 in runtime/ and platform/ (scripts/function_lengths.py), but the
known exceptions listed in function_size_exceptions.txt.

First it checks that the checker bites: on a small tree written here, with
the shapes a clang-formatted source gives a function (wrapped signatures,
members defined in their class, constructors with initializer lists,
lambdas, function-like macros, #if branches, .inc files, tables), it must
name exactly the functions over their limit, with their lengths. Then it
runs the checker on the product.
"""
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECKER = ROOT / "scripts" / "function_lengths.py"
EXCEPTIONS = pathlib.Path(__file__).resolve().parent / "function_size_exceptions.txt"


def body(lines):
    """`lines` statement lines of a function body."""
    return "".join("  x += 1;\n" for _ in range(lines))


def function(signature, total):
    """A function of `total` lines: its signature's lines, a body and `}`."""
    head = signature.rstrip("\n") + "\n"
    return head + body(total - head.count("\n") - 1) + "}\n"


PLANNER = (
    "#include <vector>\n"
    "namespace kiln {\n"
    "namespace {\n"
    "// A table is data, however long.\n"
    "const int kTable[] = {\n" + "".join(f"    {i},\n" for i in range(200)) + "};\n"
    "}  // namespace\n"
    "\n"
    + function("void over_by_one() {", 121)
    + function("void at_limit() {", 120)
    # A wrapped signature counts from its first line.
    + function("std::vector<int> wrapped(int a,\n                         int b) {", 121)
    + function("std::vector<int> wrapped_fits(int a,\n                              int b) {", 120)
    # Braces in strings, characters and comments are not braces.
    + "int literals() {\n"
    '  const char* s = "{{{";  // }}}\n'
    "  const char c = '{';\n"
    "  /* { */\n"
    '  const char* r = R"x({)x";\n' + body(4) + "  return 0;\n}\n"
    # A declaration with a {} default argument opens no function.
    + "void declared(std::vector<int> v = {});\n"
    # A lambda counts within its function.
    + function(
        "int with_lambda() {\n  auto f = [&](int v) {\n" + body(60) + "    return v;\n  };\n",
        125,
    )
    + "class Widget {\n"
    " public:\n"
    "  Widget() : a_{1}, b_(2) {\n" + body(120) + "  }\n"
    "  void draw() const {\n" + body(119) + "  }\n"
    "  int small() const { return a_; }\n"
    "\n"
    " private:\n"
    "  int a_{0};\n"
    "  int b_ = 0;\n"
    "};\n"
    + function("Widget::Widget(int a) : a_{a}, b_{a} {", 121)
    + function("[[nodiscard]] inline std::vector<int> Widget::make() const {", 121)
    # A function-like macro before a body reads as a function of that name.
    + function("KILN_THING(name) {", 121)
    # Two #if branches each opening the same function.
    + "#if defined(A)\n"
    "int branches(int a) {\n"
    "#else\n"
    "int branches() {\n"
    "#endif\n" + body(118) + "}\n"
    # Preprocessor lines are not code: a macro may open a brace it does not close.
    + "#define KILN_OPEN_BLOCK(x) \\\n  do {      \\\n    x;\n"
    + "}  // namespace kiln\n"
)

RUNTIME = (
    "namespace kiln {\n"
    + function("void runtime_over() {", 76)
    + function("void runtime_at_limit() {", 75)
    + "}  // namespace kiln\n"
)

# (path, name, length) the checker must report, with --runtime-limit 75.
EXPECTED = {
    ("planner/a.cc", "over_by_one", 121),
    ("planner/a.cc", "wrapped", 121),
    ("planner/a.cc", "with_lambda", 125),
    ("planner/a.cc", "Widget::Widget", 122),
    ("planner/a.cc", "Widget::Widget", 121),
    ("planner/a.cc", "Widget::draw", 121),
    ("planner/a.cc", "Widget::make", 121),
    ("planner/a.cc", "KILN_THING", 121),
    ("planner/a.cc", "branches", 123),
    ("kernels/body.inc", "tile", 130),
    ("runtime/r.cc", "runtime_over", 76),
}


def run(args):
    done = subprocess.run([sys.executable, str(CHECKER)] + args, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def reported(output):
    found = set()
    for line in output.splitlines():
        if " lines (limit " not in line:
            continue
        where, rest = line.split(": ", 1)
        name, length = rest.split(" is ", 1)
        found.add((where.rsplit(":", 1)[0], name, int(length.split()[0])))
    return found


def check_the_checker():
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        files = {
            "planner/a.cc": PLANNER,
            "runtime/r.cc": RUNTIME,
            "kernels/body.inc": function("template <int N>\nKILN_DT void tile(const float* x) {", 130),
            # Not product: tests beside the code, and the top-level tests/.
            "planner/tests/t.cc": function("void a_long_test() {", 300),
            "tests/t.cc": function("void another_long_test() {", 300),
        }
        for path, text in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)

        rc, out = run(["--root", tmp, "--runtime-limit", "75"])
        if rc != 1 or reported(out) != EXPECTED:
            problems.append(f"expected exit 1 and {sorted(EXPECTED)}, got exit {rc}:\n{out}")

        # Without --runtime-limit the runtime has the general limit.
        rc, out = run(["--root", tmp])
        if ("runtime/r.cc", "runtime_over", 76) in reported(out):
            problems.append(f"runtime_over reported at the general limit:\n{out}")

        # Known exceptions are listed but pass; one that no longer applies is noted.
        exceptions = root / "exceptions.txt"
        exceptions.write_text(
            "# comment\n" + "".join(f"{p} {n}\n" for p, n, _ in EXPECTED) + "planner/a.cc at_limit\n"
        )
        rc, out = run(["--root", tmp, "--runtime-limit", "75", "--exceptions", str(exceptions)])
        if rc != 0 or "note: exception no longer needed: planner/a.cc at_limit" not in out:
            problems.append(f"with every long function excepted: exit {rc}:\n{out}")

        # A file whose braces do not balance fails the check.
        (root / "planner/broken.cc").write_text("void f() {\n  {\n}\n")
        rc, out = run(["--root", tmp, "--runtime-limit", "75", "--exceptions", str(exceptions)])
        if rc != 1 or "error: planner/broken.cc" not in out:
            problems.append(f"an unreadable file passed: exit {rc}:\n{out}")
    return problems


def main():
    problems = check_the_checker()
    for p in problems:
        print(f"the checker is wrong: {p}")
    if problems:
        return 1
    print("the checker finds the long functions of a test tree")
    rc, out = run(["--limit", "120", "--runtime-limit", "75", "--exceptions", str(EXCEPTIONS)])
    print(out, end="")
    return rc


if __name__ == "__main__":
    sys.exit(main())
