#!/usr/bin/env python3
"""Keeps every crate's modules acyclic and the CPU device's layers one-way.

Reads each crate's module tree from its sources (`mod` declarations, files and inline modules;
test-only code left out) and the paths each module names (`use` trees, `crate::`/`super::`/
`self::` paths, paths through an imported or child module, re-exports followed to where the item
lives). From that graph it reports:

- `cycle CRATE MODULE`: a module in an import cycle (a strongly connected component of two or
  more modules);
- `layer CRATE FROM -> TO`: an import that goes up or sideways in `targets/cpu`'s layers
  (`base` < `isa` < `micro` < `ops` < `steps` < `program`; one `ops/<family>` never imports
  another; a layered module never imports one that is in no layer yet);
- `long-fn CRATE MODULE::NAME`: a non-test function of more than 200 lines (GPU encoders aside).

Each finding must be listed in `tests/expectations/layers.txt`, and each listed line must still
be found, so the list only shrinks as code is moved and a new cycle turns CI red. `--update`
rewrites the list; `--self-test` checks the checker on small made-up crates; `--graph CRATE`
prints one crate's module edges.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXPECTATIONS = ROOT / "tests" / "expectations" / "layers.txt"
LONG_FUNCTION_LINES = 200
# The GPU devices' plan encoders (Vulkan's command recording, CUDA's launch lowering) are one
# long match over the op kinds each until they are split per family; the rest is held to it.
LONG_FUNCTION_EXEMPT = ("targets/vulkan/src/encode.rs", "targets/cuda/src/lower.rs")
# `targets/cpu`'s layers, lowest first (folders under its `src/`).
CPU_CRATE = "targets/cpu"
CPU_LAYERS = ["base", "isa", "micro", "ops", "steps", "program"]


@dataclass
class Module:
    """One module: its path from the crate root, its own text (child modules cut out)."""

    path: tuple[str, ...]
    file: Path
    text: str = ""
    children: dict[str, "Module"] = field(default_factory=dict)
    imports: dict[str, tuple[str, ...]] = field(default_factory=dict)
    globs: list[tuple[str, ...]] = field(default_factory=list)
    parent: "Module | None" = None

    @property
    def name(self) -> str:
        return "::".join(self.path) if self.path else "crate"


# ---------------------------------------------------------------------------------------------
# Lexing: comments, strings and test-only items out.

def strip_comments_and_strings(src: str) -> str:
    """`src` with comments and string/char literals blanked (newlines kept, for line numbers)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:i + 20]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            end = src.find('"' + m.group(1), i + len(m.group(0)))
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'\n])'", src[i:])
            if m:  # a char literal (a lifetime has no closing quote right after one char)
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


TEST_ATTR = re.compile(r"#\[cfg\((?:test|all\(\s*test\b[^\]]*|any\(\s*test\b[^\]]*)\)\]")


def matching_brace(text: str, open_at: int) -> int:
    """The index just past the `}` that closes the `{` at `open_at`."""
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def item_end(text: str, start: int) -> int:
    """The end of the item that starts at `start`: its closing brace or its `;`."""
    depth_paren = 0
    for j in range(start, len(text)):
        ch = text[j]
        if ch in "([":
            depth_paren += 1
        elif ch in ")]":
            depth_paren -= 1
        elif ch == ";" and depth_paren <= 0:
            return j + 1
        elif ch == "{" and depth_paren <= 0:
            return matching_brace(text, j)
    return len(text)


def blank(text: str, start: int, end: int) -> str:
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def drop_test_items(text: str) -> str:
    """`text` with every `#[cfg(test)]` item blanked out."""
    while True:
        m = TEST_ATTR.search(text)
        if not m:
            return text
        j = m.end()
        # Further attributes of the same item (their brackets may nest).
        while k := re.match(r"\s*#\[", text[j:]):
            depth, j = 1, j + k.end()
            while j < len(text) and depth:
                depth += {"[": 1, "]": -1}.get(text[j], 0)
                j += 1
        text = blank(text, m.start(), item_end(text, j))


# ---------------------------------------------------------------------------------------------
# Module tree.

MOD_DECL = re.compile(r"(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])")


def file_of(parent_file: Path, is_dir_owner: bool, parent_path_in_file: list[str], name: str) -> Path | None:
    base = parent_file.parent if is_dir_owner else parent_file.with_suffix("")
    base = base.joinpath(*parent_path_in_file)
    for candidate in (base / f"{name}.rs", base / name / "mod.rs"):
        if candidate.exists():
            return candidate
    return None


def load_module(path: tuple[str, ...], file: Path, text: str, is_dir_owner: bool,
                inline_path: list[str], parent: Module | None) -> Module:
    """Builds the module whose source is `text` (a file, or an inline module's body)."""
    module = Module(path=path, file=file, parent=parent)
    own = text
    pos = 0
    while True:
        m = MOD_DECL.search(own, pos)
        if not m:
            break
        # Only at item level: the declaration (with its `pub`) must start a statement.
        before = own[:m.start()].rstrip()
        if before and before[-1] not in ";{}]":
            pos = m.end()
            continue
        name = m.group(1)
        if m.group(2) == ";":
            child_file = file_of(file, is_dir_owner, inline_path, name)
            if child_file is not None:
                child_text = drop_test_items(strip_comments_and_strings(child_file.read_text()))
                module.children[name] = load_module(
                    path + (name,), child_file, child_text,
                    child_file.name in ("mod.rs", "lib.rs", "main.rs"), [], module)
            pos = m.end()
        else:
            open_at = m.end() - 1
            close = matching_brace(own, open_at)
            body = own[open_at + 1:close - 1]
            module.children[name] = load_module(
                path + (name,), file, body, is_dir_owner, inline_path + [name], module)
            own = blank(own, open_at + 1, close - 1)
            pos = close
    module.text = own
    parse_uses(module)
    return module


USE_DECL = re.compile(r"(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);")


def expand_use_tree(tree: str) -> list[tuple[tuple[str, ...], str | None]]:
    """`a::{b, c::d as e, self}` → [((a, b), b), ((a, c, d), e), ((a,), a)]; `*` → alias None."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+", " @ ", tree))
    out: list[tuple[tuple[str, ...], str | None]] = []

    def walk(prefix: tuple[str, ...], t: str) -> None:
        if t.startswith("::"):
            t = t[2:]
        brace = t.find("{")
        if brace >= 0:
            head = [s for s in t[:brace].split("::") if s]
            inner = t[brace + 1:t.rfind("}")]
            depth, start = 0, 0
            parts = []
            for i, ch in enumerate(inner):
                if ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                elif ch == "," and depth == 0:
                    parts.append(inner[start:i])
                    start = i + 1
            parts.append(inner[start:])
            for part in parts:
                if part:
                    walk(prefix + tuple(head), part)
            return
        alias = None
        if "@" in t:
            t, alias = t.split("@", 1)
        segs = [s for s in t.split("::") if s]
        if segs and segs[-1] == "*":
            out.append((prefix + tuple(segs[:-1]), None))
            return
        if segs and segs[-1] == "self":
            segs = segs[:-1]
            full = prefix + tuple(segs)
            out.append((full, alias or (full[-1] if full else None)))
            return
        full = prefix + tuple(segs)
        if full:
            out.append((full, alias or full[-1]))

    walk((), tree)
    return out


def parse_uses(module: Module) -> None:
    for m in USE_DECL.finditer(module.text):
        for full, alias in expand_use_tree(m.group(1)):
            if alias is None:
                module.globs.append(full)
            elif alias != "_":
                module.imports[alias] = full


# ---------------------------------------------------------------------------------------------
# Resolution.

class Crate:
    """A crate's module tree and the edges between its modules."""

    def __init__(self, label: str, root_file: Path):
        self.label = label
        text = drop_test_items(strip_comments_and_strings(root_file.read_text()))
        self.root = load_module((), root_file, text, True, [], None)
        self.modules: dict[tuple[str, ...], Module] = {}
        self._index(self.root)

    def _index(self, module: Module) -> None:
        self.modules[module.path] = module
        for child in module.children.values():
            self._index(child)

    def resolve(self, context: Module, segs: tuple[str, ...], depth: int = 0) -> Module | None:
        """The module in which the item `segs` (a path as written in `context`) lives, or None
        when the path leaves the crate."""
        if depth > 20 or not segs:
            return None
        first, rest = segs[0], segs[1:]
        if first in ("crate", "$crate"):
            current = self.root
        elif first == "super":
            current = context.parent
            while rest and rest[0] == "super" and current is not None:
                current, rest = current.parent, rest[1:]
            if current is None:
                return None
        elif first == "self":
            current = context
        elif first in context.children:
            current, rest = context.children[first], rest
        elif first in context.imports and context.imports[first] != segs[:1]:
            return self.resolve(context, context.imports[first] + rest, depth + 1)
        else:
            return None
        return self.walk(current, rest, depth)

    def walk(self, current: Module, rest: tuple[str, ...], depth: int) -> Module:
        while rest:
            head = rest[0]
            if head in current.children:
                current, rest = current.children[head], rest[1:]
            elif head in current.imports:
                target = self.resolve(current, current.imports[head] + rest[1:], depth + 1)
                return target if target is not None else current
            else:
                break
        return current

    def edges(self) -> dict[tuple[str, ...], set[tuple[str, ...]]]:
        """For each module, the modules whose items it names."""
        graph: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
        path_re = re.compile(r"(?<![\w:])(\$?\w+(?:::\w+)+)")
        for module in self.modules.values():
            targets: set[tuple[str, ...]] = set()
            refs: list[tuple[str, ...]] = list(module.imports.values()) + [g + ("*",) for g in module.globs]
            without_uses = USE_DECL.sub(" ", module.text)
            refs += [tuple(m.group(1).split("::")) for m in path_re.finditer(without_uses)]
            for segs in refs:
                if segs[-1] == "*":
                    target = self.resolve(module, segs[:-1]) if len(segs) > 1 else None
                else:
                    target = self.resolve(module, segs)
                if target is not None and target.path != module.path:
                    targets.add(target.path)
            graph[module.path] = targets
        return graph


def strongly_connected(graph: dict[tuple[str, ...], set[tuple[str, ...]]]) -> list[list[tuple[str, ...]]]:
    """Tarjan's strongly connected components (iterative)."""
    index: dict = {}
    low: dict = {}
    on_stack: set = set()
    stack: list = []
    components = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == node:
                        break
                components.append(component)
    return components


# ---------------------------------------------------------------------------------------------
# Findings.

def layer_of(path: tuple[str, ...]) -> tuple[int, str] | None:
    """(rank, family) of a `targets/cpu` module in the layers, or None."""
    if path and path[0] in CPU_LAYERS:
        family = path[1] if path[0] == "ops" and len(path) > 1 else ""
        return CPU_LAYERS.index(path[0]), family
    return None


def layer_findings(label: str, graph) -> list[str]:
    out = []
    for src, targets in graph.items():
        src_layer = layer_of(src)
        if src_layer is None:
            continue
        for dst in targets:
            if not dst:  # the crate root's own items (the error type, the device)
                continue
            dst_layer = layer_of(dst)
            bad = (
                dst_layer is None
                or dst_layer[0] > src_layer[0]
                or (dst_layer[0] == src_layer[0] == CPU_LAYERS.index("ops")
                    and dst_layer[1] != src_layer[1] and dst_layer[1] != "")
            )
            if bad:
                out.append(f"layer {label} {'::'.join(src)} -> {'::'.join(dst)}")
    return out


FN_DECL = re.compile(r"\bfn\s+(\w+)\s*(?:<[^{;]*?>)?\s*\(")


def long_functions(label: str, crate: Crate, root: Path = ROOT) -> list[str]:
    out = []
    for module in crate.modules.values():
        rel = module.file.relative_to(root).as_posix()
        if rel.startswith(LONG_FUNCTION_EXEMPT):
            continue
        text = module.text
        for m in FN_DECL.finditer(text):
            end = item_end(text, m.end())
            if end <= m.end() or text[end - 1] != "}":
                continue
            lines = text.count("\n", m.start(), end) + 1  # from `fn` to its closing brace
            if lines > LONG_FUNCTION_LINES:
                out.append(f"long-fn {label} {module.name}::{m.group(1)}")
    return out


def crate_roots(root: Path) -> list[tuple[str, Path]]:
    """Every crate root in the repository (library, binary, `src/bin` and fuzz targets), labelled
    by its folder; a package with both a library and a binary gets `[lib]` and `[main]`."""
    found = []
    for toml in sorted(root.rglob("Cargo.toml")):
        if {"target", ".venv"} & set(toml.relative_to(root).parts):
            continue
        label = toml.parent.relative_to(root).as_posix()
        src = toml.parent / "src"
        roots = [src / name for name in ("lib.rs", "main.rs") if (src / name).exists()]
        for file in roots:
            found.append((f"{label}[{file.stem}]" if len(roots) == 2 else label, file))
        extras = sorted(src.glob("bin/*.rs")) + sorted(toml.parent.glob("fuzz_targets/*.rs"))
        found += [(f"{label}[{extra.stem}]", extra) for extra in extras]
    return found


def findings(root: Path = ROOT) -> list[str]:
    out = []
    for label, file in crate_roots(root):
        crate = Crate(label, file)
        graph = crate.edges()
        for component in strongly_connected(graph):
            if len(component) > 1:
                out += [f"cycle {label} {crate.modules[p].name}" for p in component]
        if label == CPU_CRATE:
            out += layer_findings(label, graph)
        out += long_functions(label, crate)
    return sorted(set(out))


def read_expectations() -> list[str]:
    if not EXPECTATIONS.exists():
        return []
    return [line.strip() for line in EXPECTATIONS.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


HEADER = """\
# Module-graph findings that are known and not yet fixed (scripts/layers.py; CI fails on any
# finding not listed here and on any line here that is no longer found, so the list only
# shrinks). `cycle CRATE MODULE`: the module is in an import cycle. `layer CRATE A -> B`: an
# import against targets/cpu's one-way layers. `long-fn CRATE MODULE::NAME`: a non-test function
# over 200 lines. Rewrite with `python3 scripts/layers.py --update` after fixing some.
"""


# ---------------------------------------------------------------------------------------------
# Self-test: made-up crates with known answers.

def self_test() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)

        def write(rel: str, text: str) -> None:
            p = base / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)

        # a ↔ b through a re-export at the root; c imports a only; a test module imports b
        # (ignored); a string and a comment naming crate::c (ignored).
        write("one/Cargo.toml", "[package]\n")
        write("one/src/lib.rs", "mod a;\nmod b;\nmod c;\npub use b::Thing;\n"
              "#[cfg(test)]\nmod tests { use crate::c::X; }\n")
        write("one/src/a.rs", "use crate::Thing;\n// crate::c::Y\nconst S: &str = \"crate::c::Z\";\n"
              "pub fn f() {}\n")
        write("one/src/b.rs", "pub struct Thing;\npub fn g() { super::a::f() }\n")
        write("one/src/c.rs", "use crate::a;\npub fn h() { a::f() }\n"
              "#[cfg(test)]\nmod tests { use crate::b::Thing; }\n")
        crate = Crate("one", base / "one/src/lib.rs")
        graph = crate.edges()
        assert graph[("a",)] == {("b",)}, graph[("a",)]
        assert graph[("b",)] == {("a",)}, graph[("b",)]
        assert graph[("c",)] == {("a",)}, graph[("c",)]
        cycles = [sorted(c) for c in strongly_connected(graph) if len(c) > 1]
        assert cycles == [[("a",), ("b",)]], cycles

        # Layers: ops/conv may use base and micro; ops/pool importing ops/conv, base importing
        # steps, and steps importing a module in no layer are each one finding.
        write("cpu/Cargo.toml", "[package]\n")
        write("cpu/src/lib.rs", "mod base;\nmod micro;\nmod ops;\nmod steps;\nmod legacy;\n")
        write("cpu/src/base/mod.rs", "pub mod dims;\n")
        write("cpu/src/base/dims.rs", "pub struct Dims;\npub fn up() { crate::steps::run() }\n")
        write("cpu/src/micro/mod.rs", "use crate::base::dims::Dims;\npub fn block(_: Dims) {}\n")
        write("cpu/src/ops/mod.rs", "pub mod conv;\npub mod pool;\n")
        write("cpu/src/ops/conv/mod.rs", "use crate::{base::dims::Dims, micro};\n"
              "pub fn conv(d: Dims) { micro::block(d) }\n")
        write("cpu/src/ops/pool/mod.rs", "pub fn pool() { super::conv::conv(crate::base::dims::Dims) }\n")
        write("cpu/src/steps/mod.rs", "pub fn run() { crate::ops::pool::pool(); crate::legacy::old() }\n")
        write("cpu/src/legacy.rs", "pub fn old() {}\n")
        cpu = Crate(CPU_CRATE, base / "cpu/src/lib.rs")
        got = sorted(layer_findings(CPU_CRATE, cpu.edges()))
        want = sorted([
            f"layer {CPU_CRATE} base::dims -> steps",
            f"layer {CPU_CRATE} ops::pool -> ops::conv",
            f"layer {CPU_CRATE} steps -> legacy",
        ])
        assert got == want, got

        # Use trees: nested braces, `self`, `as`, globs.
        assert expand_use_tree("a::{b, c::{d as e, self}, f::*}") == [
            (("a", "b"), "b"), (("a", "c", "d"), "e"), (("a", "c"), "c"), (("a", "f"), None)]

        # A 201-line function is found, a 200-line one and a test function are not.
        body = "    let _x = 1;\n"
        write("long/Cargo.toml", "[package]\n")
        write("long/src/lib.rs", "pub fn long() {\n" + body * 199 + "}\n"
              "pub fn fits() {\n" + body * 198 + "}\n"
              "#[cfg(test)]\nfn test_long() {\n" + body * 300 + "}\n")
        long_crate = Crate("long", base / "long/src/lib.rs")
        got = long_functions("long", long_crate, root=base)
        assert got == ["long-fn long crate::long"], got
    print("layers.py self-test: passed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="rewrite the expectations list")
    parser.add_argument("--self-test", action="store_true", help="check the checker")
    parser.add_argument("--graph", metavar="CRATE", help="print one crate's module edges")
    args = parser.parse_args()
    if args.self_test:
        self_test()
        return 0
    if args.graph:
        for label, file in crate_roots(ROOT):
            if label == args.graph:
                crate = Crate(label, file)
                for src, targets in sorted(crate.edges().items()):
                    for dst in sorted(targets):
                        print(f"{crate.modules[src].name} -> {crate.modules[dst].name}")
                return 0
        print(f"layers.py: no crate {args.graph!r}; crates: "
              + ", ".join(label for label, _ in crate_roots(ROOT)), file=sys.stderr)
        return 2
    found = findings()
    if args.update:
        EXPECTATIONS.write_text(HEADER + "".join(line + "\n" for line in found))
        print(f"layers.py: wrote {len(found)} known findings to {EXPECTATIONS.relative_to(ROOT)}")
        return 0
    expected = set(read_expectations())
    new = [f for f in found if f not in expected]
    gone = sorted(expected - set(found))
    summary: dict[str, int] = {}
    for f in found:
        summary[f.split()[0]] = summary.get(f.split()[0], 0) + 1
    print("layers.py: " + ", ".join(f"{v} {k}" for k, v in sorted(summary.items())) + " known"
          if found else "layers.py: no cycles, no layer breaks, no long functions")
    for f in new:
        print(f"new finding (fix it; the list may only shrink): {f}", file=sys.stderr)
    for f in gone:
        print(f"fixed, remove from {EXPECTATIONS.relative_to(ROOT)} (or run --update): {f}",
              file=sys.stderr)
    return 1 if new or gone else 0


if __name__ == "__main__":
    sys.exit(main())
