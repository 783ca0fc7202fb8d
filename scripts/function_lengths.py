#!/usr/bin/env python3
"""Lists the product functions longer than a limit, so that every function
fits on a screen: the runtime and the platform layer keep theirs at 75
lines at most, the rest of the product at 120 (ctest layering.function_size
checks both, tests/layering/function_size_test.py).

A function's length runs from the first line of its signature (its
`template <...>` line, where it has one) to its closing brace, both
included; the lambdas and local classes inside a function count as part of
it. Product code is schema/ platform/ runtime/ kernels/ capi/ backends/
comm/ planner/ (their .cc .h .cu .cuh .inc .c files, less generated
headers); tests/, bench/ and examples/ are not.

How a function is found: the sources are clang-formatted (.clang-format),
but the reader does not lean on the layout. It drops comments, string and
character literals and preprocessor lines, counts braces, and calls a `{`
a function body when it opens at namespace or class scope (outside any
function) after a head with a parameter list: a signature, possibly
wrapped over several lines, followed only by qualifiers (const, override,
noexcept, a trailing return type) or a constructor's initializer list. A
`{` after `namespace` or `extern "C"` opens a scope whose contents are read
the same way; after class/struct/union a class body (its member functions
are read, named Class::member); after enum or `=` (an initializer) a block
of data. A function-like macro followed by a body (`KILN_THING(x) {`) is
read as a function under the macro's name. A file whose braces do not
balance (say, two #if branches each opening a brace) is read again with
only the first branch of every #if; if that fails too the file is reported
as unreadable and the check fails, so that nothing is skipped in silence.

Usage:
  scripts/function_lengths.py [--limit 120] [--runtime-limit 75]
                              [--exceptions FILE] [--all] [--root DIR] [paths...]

--runtime-limit applies a tighter limit to runtime/ and platform/.
--exceptions names a file of known exceptions, one `path function` a line
(`#` starts a comment): those are listed but do not fail the check.
Paths (files or folders) limit the check to them; by default the whole
product. Exits 1 when a function not in the exceptions is over its limit
or a file cannot be read.
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PRODUCT = ["schema", "platform", "runtime", "kernels", "capi", "backends", "comm", "planner", "python"]
NOT_PRODUCT = {"tests", "test", "bench", "examples"}
SUFFIXES = {".cc", ".h", ".cu", ".cuh", ".inc", ".c"}
RUNTIME = ("runtime", "platform")

# Tokens after a parameter list that still belong to the signature.
QUALIFIERS = {"const", "override", "final", "noexcept", "mutable", "volatile", "&", "&&", "throw"}
AGGREGATES = {"class", "struct", "union"}
CONTROL = {"if", "for", "while", "switch", "catch", "do", "else", "try", "return"}

TOKEN = re.compile(
    r"""
    (?P<newline>\n)
  | (?P<space>[ \t\r\f\v]+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<raw>(?:u8|[uUL])?R"(?P<delim>[^()\\\s]{0,16})\(.*?\)(?P=delim)")
  | (?P<string>(?:u8|[uUL])?"(?:[^"\\\n]|\\.)*")
  | (?P<char>(?:u8|[uUL])?'(?:[^'\\\n]|\\.)+')
  | (?P<number>\.?[0-9](?:[0-9a-zA-Z_.]|'[0-9a-zA-Z_]|[eEpP][+-])*)
  | (?P<ident>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<punct>::|->|&&|\|\||<<=|>>=|[-+*/%&|^!=<>]=|\+\+|--|<<|\.\.\.|.)
    """,
    re.S | re.X,
)


class Function:
    def __init__(self, path, name, first, last):
        self.path = path
        self.name = name
        self.first = first
        self.last = last

    @property
    def length(self):
        return self.last - self.first + 1


class Unreadable(Exception):
    pass


def preprocess(text, first_branch_only):
    """Blanks preprocessor lines (and, if asked, every #else/#elif branch),
    keeping the line count so that line numbers stay right."""
    lines = text.split("\n")
    out = []
    # Per open #if: whether the branch being read is skipped.
    stack = []
    continued = False
    for line in lines:
        stripped = line.lstrip()
        if continued or stripped.startswith("#"):
            directive = "" if continued else stripped[1:].lstrip()
            continued = line.rstrip().endswith("\\")
            if first_branch_only and directive:
                word = re.match(r"[a-z]*", directive).group(0)
                if word in ("if", "ifdef", "ifndef"):
                    stack.append(bool(stack and stack[-1]))
                elif word in ("elif", "else") and stack:
                    stack[-1] = True
                elif word == "endif" and stack:
                    stack.pop()
            out.append("")
            continue
        out.append("" if (stack and stack[-1]) else line)
    return "\n".join(out)


def tokens(text):
    """Yields (kind, value, line) for every significant token."""
    line = 1
    pos = 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if m is None:  # an unpaired quote: take the character alone
            yield "punct", text[pos], line
            pos += 1
            continue
        kind = m.lastgroup if m.lastgroup != "delim" else "raw"
        value = m.group(0)
        if kind not in ("newline", "space", "comment"):
            if kind in ("raw", "string", "char"):
                yield "literal", '""', line
            else:
                yield kind, value, line
        line += value.count("\n")
        pos = m.end()


def top_level(head):
    """The head's tokens outside any (), [], {} and template <> pairs, with
    a ("group", opener) token for each pair's opening and a ("close",
    closer) token for its end."""
    out = []
    depth = 0
    for i, tok in enumerate(head):
        v = tok[1]
        after_operator = i > 0 and head[i - 1][1] == "operator"
        if v in ("(", "[", "{") or (v == "<" and not after_operator):
            if depth == 0:
                out.append(("group", v, tok[2]))
            depth += 1
        elif v in (")", "]", "}") or (v in (">", ">>") and not after_operator):
            depth -= 2 if v == ">>" else 1
            if depth <= 0:
                depth = 0
                out.append(("close", v, tok[2]))
        elif depth == 0:
            out.append(tok)
    return out


def strip_template(head):
    """Drops leading `template <...>` clauses (angle brackets balanced)."""
    i = 0
    while i < len(head) and head[i][1] == "template" and i + 1 < len(head) and head[i + 1][1] == "<":
        depth = 0
        j = i + 1
        while j < len(head):
            if head[j][1] == "<":
                depth += 1
            elif head[j][1] == ">":
                depth -= 1
            elif head[j][1] == ">>":
                depth -= 2
            if depth <= 0:
                break
            j += 1
        i = j + 1
    return head[i:]


# Words that take a parenthesized argument and are not a function's name.
ATTRIBUTES = {"__attribute__", "alignas", "__declspec", "decltype", "__attribute"}
# Words that may come before class/struct/union in a declaration.
STORAGE = {"static", "thread_local", "const", "constexpr", "inline", "typedef", "extern", "volatile"}


def drop_attributes(top):
    """Drops [[...]] and __attribute__((...))-like groups from top-level tokens."""
    out = []
    i = 0
    while i < len(top):
        tok = top[i]
        if tok[1] in ATTRIBUTES and i + 2 < len(top) and top[i + 1][1] == "(":
            i += 3
            continue
        if tok[0] == "group" and tok[1] == "[" and (not out or out[-1][1] in STORAGE):
            i += 2  # [[nodiscard]] and the like, before the declaration
            continue
        out.append(tok)
        i += 1
    return out


def classify(head):
    """What a `{` opened at namespace or class scope starts, from the tokens
    since the last statement boundary: ('namespace'|'class'|'data'|'function', name)."""
    words = [t[1] for t in head]
    if not words:
        return "data", None
    if words[0] == "namespace" or (words[0] == "inline" and words[1:2] == ["namespace"]):
        return "namespace", None
    if words[0] == "extern" and len(words) == 2 and head[1][0] == "literal":
        return "namespace", None
    top = drop_attributes(top_level(strip_template(head)))
    lead = [t for t in top if t[1] not in STORAGE]
    if lead and lead[0][1] in AGGREGATES:
        names = [t[1] for t in lead[1:] if t[0] == "ident" and t[1] != "final"]
        return "class", names[0] if names else None
    if lead and lead[0][1] == "enum":
        return "data", None
    tw = [t[1] if t[0] != "close" else ")" for t in top]
    # A named lambda at namespace scope: `auto f = [...](...) ... {`.
    if "=" in tw:
        eq = tw.index("=")
        if tw[eq + 1 : eq + 2] == ["["] and "(" in tw[eq + 1 :]:
            return "function", ident_before(top, eq)
        return "data", None
    if tw and tw[0] in CONTROL:
        return "data", None
    # The parameter list: the first () group after a name that only
    # qualifiers, a trailing return type or a constructor's initializer
    # list follow (a macro's arguments before the return type are not it).
    for paren, tok in enumerate(top):
        if tok[0] != "group" or tok[1] != "(" or paren == 0:
            continue
        if top[paren - 1][0] not in ("ident", "punct", "close"):
            continue
        rest = [t[1] if t[0] != "close" else ")" for t in top[paren + 2 :]]
        if ":" in rest:
            # `) : a_(x), b_{y} {`: a brace after a member's name
            # initializes it; the body follows a ) or }.
            if head[-1][1] in (")", "}"):
                return "function", function_name(top, paren)
            return "data", None
        if only_qualifiers(rest):
            return "function", function_name(top, paren)
    return "data", None


def only_qualifiers(rest):
    i = 0
    while i < len(rest):
        w = rest[i]
        if w in QUALIFIERS or w in ATTRIBUTES:
            i += 1
            if i < len(rest) and rest[i] == "(":  # noexcept(...), throw(), __attribute__((...))
                i += 2
            continue
        return w == "->"  # a trailing return type
    return True


def ident_before(top, index):
    for tok in reversed(top[:index]):
        if tok[0] == "ident":
            return tok[1]
    return None


def function_name(top, paren):
    """The (possibly qualified) name before the parameter list: f,
    Class::f, Class::~Class, operator==, Class::operator()."""
    before = top[paren - 1]
    if before[0] == "close" and paren >= 3 and top[paren - 3][1] == "operator":  # operator() and []
        return qualified(top, paren - 3) + top[paren - 2][1] + before[1]
    if before[0] == "punct":  # operator==, operator<<, ...
        i = paren - 1
        ops = ""
        while i > 0 and top[i][0] == "punct" and top[i][1] != "operator":
            ops = top[i][1] + ops
            i -= 1
        return qualified(top, i) + ops
    if paren >= 2 and top[paren - 2][1] == "operator":  # operator bool
        return qualified(top, paren - 2) + " " + before[1]
    return qualified(top, paren - 1)


def qualified(top, i):
    parts = [top[i][1]]
    while i >= 1 and top[i - 1][1] in ("::", "~"):
        if top[i - 1][1] == "~":
            parts.insert(0, "~")
            i -= 1
            continue
        j = i - 2
        if j >= 0 and top[j][0] == "close":  # Class<T>::f
            j -= 1
            while j > 0 and top[j][0] != "group":
                j -= 1
            j -= 1
        if j < 0 or top[j][0] != "ident":
            break
        parts.insert(0, "::")
        parts.insert(0, top[j][1])
        i = j
    return "".join(parts)


def read_functions(path, text):
    """Every function defined at namespace or class scope in one file."""
    for first_branch_only in (False, True):
        try:
            return scan(path, preprocess(text, first_branch_only))
        except Unreadable:
            continue
    raise Unreadable(f"{path}: braces do not balance, even reading only the first branch of each #if")


def scan(path, text):
    found = []
    # Scope stack: (kind, name, first line, brace depth inside the function).
    stack = [("namespace", None, 0, [])]
    head = []
    depth_in_function = 0
    function_start = None
    for kind, value, line in tokens(text):
        if function_start is not None:
            if value == "{":
                depth_in_function += 1
            elif value == "}":
                depth_in_function -= 1
                if depth_in_function == 0:
                    name, first = function_start
                    found.append(Function(path, name, first, line))
                    function_start = None
                    head = []
            continue
        if value == ";":
            head = []
            continue
        if value == ":" and len(head) == 1 and head[0][1] in ("public", "private", "protected"):
            head = []
            continue
        if value == "{":
            scope = stack[-1][0]
            what, name = ("data", None)
            if scope in ("namespace", "class") and not inside_brackets(head):
                what, name = classify(head)
            if what == "function":
                if stack[-1][0] == "class" and stack[-1][1] and name and "::" not in name:
                    name = f"{stack[-1][1]}::{name}"
                first = head[0][2] if head else line
                function_start = (name or "?", first)
                depth_in_function = 1
                continue
            if what == "data" and scope in ("namespace", "class") and head_continues(head):
                # An initializer: the declaration's head goes on after it.
                head = head + [(kind, value, line)]
                stack.append(("init", None, line, head))
                continue
            stack.append((what, name, line, head))
            head = []
            continue
        if value == "}":
            if len(stack) == 1:
                raise Unreadable(f"{path}:{line}: unmatched }}")
            closed = stack.pop()
            head = (closed[3] + [(kind, value, line)]) if closed[0] == "init" else []
            continue
        head.append((kind, value, line))
    if function_start is not None or len(stack) != 1:
        raise Unreadable(f"{path}: unclosed brace")
    return found


def inside_brackets(head):
    """Whether the head has an unclosed ( or [ (a `{}` default argument)."""
    depth = 0
    for tok in head:
        if tok[1] in ("(", "["):
            depth += 1
        elif tok[1] in (")", "]"):
            depth -= 1
    return depth > 0


def head_continues(head):
    """Whether a data brace belongs to the declaration around it, which goes
    on after its `}` (`Foo x{1};`, `= {...};`, a member's `a_{0}` in an
    initializer list), rather than being a body of its own (an enum's)."""
    if not head:
        return False
    words = [t[1] for t in head]
    if words[0] == "enum" or words[0] in AGGREGATES or "namespace" in words[:2]:
        return False
    return head[-1][0] == "ident" or head[-1][1] in (">", "(", ",", "=", "[", "return")


def product_files(paths, root=ROOT):
    if not paths:
        paths = [root / p for p in PRODUCT]
    files = []
    for p in paths:
        p = pathlib.Path(p).resolve()
        candidates = [p] if p.is_file() else sorted(p.rglob("*"))
        for f in candidates:
            if not f.is_file() or f.suffix not in SUFFIXES or f.name.endswith("_generated.h"):
                continue
            rel = f.relative_to(root)
            if rel.parts[0] not in PRODUCT or NOT_PRODUCT & set(rel.parts[1:-1]):
                continue
            files.append(f)
    return files


def read_exceptions(path):
    entries = set()
    if path is None:
        return entries
    for raw in pathlib.Path(path).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise SystemExit(f"{path}: expected `path function`, got: {raw}")
        entries.add((parts[0], parts[1]))
    return entries


def limit_for(rel, args):
    if args.runtime_limit is not None and rel.parts[0] in RUNTIME:
        return args.runtime_limit
    return args.limit


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=120, help="most lines a product function may have")
    parser.add_argument("--runtime-limit", type=int, default=None, help="most lines in runtime/ and platform/")
    parser.add_argument("--exceptions", help="file of known exceptions: `path function` a line")
    parser.add_argument("--all", action="store_true", help="list every function with its length")
    parser.add_argument("--root", type=pathlib.Path, default=ROOT, help="the source tree (default: this checkout)")
    parser.add_argument("paths", nargs="*", help="files or folders (default: the product folders)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    exceptions = read_exceptions(args.exceptions)
    used = set()
    over = []
    unreadable = []
    count = 0
    for f in product_files(args.paths, root):
        rel = f.relative_to(root)
        try:
            functions = read_functions(rel, f.read_text(errors="replace"))
        except Unreadable as e:
            unreadable.append(str(e))
            continue
        count += len(functions)
        for fn in functions:
            limit = limit_for(rel, args)
            if args.all:
                print(f"{fn.length:5d} {rel}:{fn.first} {fn.name}")
            if fn.length > limit:
                key = (str(rel), fn.name)
                excused = key in exceptions
                if excused:
                    used.add(key)
                over.append((fn, limit, excused))
    failed = bool(unreadable)
    for fn, limit, excused in sorted(over, key=lambda o: (str(o[0].path), o[0].first)):
        note = "  (known exception)" if excused else ""
        print(f"{fn.path}:{fn.first}: {fn.name} is {fn.length} lines (limit {limit}){note}")
        failed |= not excused
    for path, name in sorted(exceptions - used):
        print(f"note: exception no longer needed: {path} {name}")
    for u in unreadable:
        print(f"error: {u}")
    bad = sum(1 for o in over if not o[2])
    print(f"{count} functions read; {bad} over the limit, {len(over) - bad} known exception(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
