"""Mutation run: how much of a deliberately broken build the unit tier's assertions catch
(a benchmark, not a test).

    python benchmarks/mutation.py [--group planner] [--seed 66] [--sample 80] [--timeout S]
                                  [--only ID,ID] [--list] [--json OUT]

Each mutant changes one token of one module: a comparison flipped (``<`` and ``<=``, ``==``
and ``!=``, ``in`` and ``not in`` ...), ``+`` and ``-`` swapped (``+=`` too), an integer
constant one off (both ways), a ``not`` dropped, or a numeric or boolean function's ``return``
made a constant (docstrings, annotations and f-strings are left alone). The text is edited
in place, comments and layout kept, in a copy of this tree, and the group's tests run against
it (``pytest -x``, with a timeout). A mutant is killed when they fail (a timeout or a broken
import counts, and is said apart), survives when they pass or none ran.

Every mutant of the group's modules is enumerated in source order and numbered; ``--sample N``
draws N of them with ``random.Random(seed)``, so a seed and a sample size name the same
mutants on every machine (``--only`` reruns some by number; ``--list`` prints them unrun).
The seed, the kill rate and every survivor are printed; ``benchmarks/mutation-survivors.md``
gives each survivor a test or the reason none can kill it.

Groups: ``planner`` (the planner's arithmetic: launcher/plan/planner.py, kv.py, weights.py,
estimates.py, ranks.py, against the plan's unit tests), ``transients`` (what request features
allocate after sizing, launcher/plan/transients.py, a group of its own so the planner's mutant
numbers hold), ``keys`` (the key enumeration's range rules in
launcher/runtime/prewarm/providers/keys.py, against its unit tests; they need torch and Triton,
so run it with the full test venv) and ``owned`` (the owned-files boundary, launcher/owned/,
against its own tests and its callers' trust tests; the hostile-input corpus is left out: its
2,000-odd cases, each a forked CLI process, have no smaller seeded subset to run per mutant).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Group:
    files: tuple[str, ...]
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()
    """Only these functions (``name`` or ``Class.name``); empty: the whole module."""


GROUPS = {
    "planner": Group(
        files=(
            "launcher/plan/planner.py",
            "launcher/plan/kv.py",
            "launcher/plan/weights.py",
            "launcher/plan/estimates.py",
            "launcher/plan/ranks.py",
        ),
        tests=(
            "tests/unit/test_plan.py",
            "tests/unit/test_kv.py",
            "tests/unit/test_golden.py",
            "tests/unit/test_boot1_estimates.py",
            "tests/unit/test_checkpoint.py",
            "tests/unit/test_b12x_sizing.py",
            "tests/unit/test_resolved_once.py",
            "tests/unit/test_planner_arithmetic.py",
        ),
    ),
    "transients": Group(
        files=("launcher/plan/transients.py",),
        tests=(
            "tests/unit/test_transients.py",
            "tests/unit/test_golden.py",
            "tests/unit/test_plan.py",
        ),
    ),
    "keys": Group(
        files=("launcher/runtime/prewarm/providers/keys.py",),
        tests=(
            "tests/unit/test_key_enumeration.py",
            "tests/unit/test_key_dependence.py",
            "tests/unit/test_sampler_keys.py",
            "tests/unit/test_key_rules.py",
        ),
        functions=(
            "Ranges.of",
            "Ranges.draft_rows",
            "_next_power_of_2",
            "_sampled_width",
            "_logprob_block",
            "_sampler_rows",
            "_logprob_count",
            "int_classes",
            "class_of",
            "reach",
        ),
    ),
    "owned": Group(
        files=(
            "launcher/owned/paths.py",
            "launcher/owned/write.py",
            "launcher/owned/remove.py",
            "launcher/owned/read.py",
        ),
        tests=(
            "tests/unit/test_owned.py",
            "tests/unit/test_owned_trust.py",
            "tests/unit/test_artifact_restore.py",
            "tests/unit/test_artifact_bake.py",
            "tests/unit/test_calibration_store_trust.py",
            "tests/unit/test_emit_writes.py",
        ),
    ),
}


@dataclass(frozen=True)
class Mutant:
    id: int
    file: str
    line: int
    what: str
    start: int
    """Byte offsets of the replaced text in the file."""
    end: int
    text: str
    """The replacement."""

    def apply(self, source: bytes) -> bytes:
        return source[: self.start] + self.text.encode() + source[self.end :]


FLIPS = {
    ast.Lt: ("<", "<="),
    ast.LtE: ("<=", "<"),
    ast.Gt: (">", ">="),
    ast.GtE: (">=", ">"),
    ast.Eq: ("==", "!="),
    ast.NotEq: ("!=", "=="),
    ast.Is: ("is", "is not"),
    ast.IsNot: ("is not", "is"),
    ast.In: ("in", "not in"),
    ast.NotIn: ("not in", "in"),
}
"""Each comparison and the one it becomes: its token, the mutant's."""
TOKEN = {
    "<": r"<(?!=)",
    "<=": r"<=",
    ">": r">(?!=)",
    ">=": r">=",
    "==": r"==",
    "!=": r"!=",
    "is": r"\bis\b(?!\s+not\b)",
    "is not": r"\bis\s+not\b",
    "in": r"(?<!not )\bin\b",
    "not in": r"\bnot\s+in\b",
    "+": r"\+(?!=)",
    "-": r"-(?!=)",
    "+=": r"\+=",
    "-=": r"-=",
}
SWAPS = {ast.Add: ("+", "-"), ast.Sub: ("-", "+")}


class _Offsets:
    """ast's (line, UTF-8 byte column) as byte offsets into the file."""

    def __init__(self, source: bytes):
        self.starts = [0]
        for line in source.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def start(self, node: ast.AST) -> int:
        return self.starts[node.lineno - 1] + node.col_offset

    def end(self, node: ast.AST) -> int:
        return self.starts[node.end_lineno - 1] + node.end_col_offset


def _skipped(tree: ast.AST) -> set[int]:
    """Nodes never mutated: docstrings, annotations, f-strings, and everything inside them."""
    out: set[int] = set()

    def drop(node: ast.AST | None) -> None:
        if node is not None:
            out.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign | ast.arg):
            drop(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            drop(node.returns)
        elif isinstance(node, ast.JoinedStr):  # an f-string's figures are words, not the plan's
            drop(node)
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for stmt in body:  # docstrings: a string expression anywhere in a body
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                    drop(stmt)
    return out


def _scopes(tree: ast.AST) -> dict[int, tuple[str, ast.FunctionDef | None]]:
    """Each node's enclosing function: its qualified name (``Class.name``) and node."""
    out: dict[int, tuple[str, ast.FunctionDef | None]] = {}

    def visit(node: ast.AST, name: str, fn: ast.FunctionDef | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = f"{name}.{child.name}" if name else child.name
                visit(child, inner, child)
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{name}.{child.name}" if name else child.name, fn)
            else:
                out[id(child)] = (name, fn)
                visit(child, name, fn)

    visit(tree, "", None)
    return out


def _in_gap(source: bytes, lo: int, hi: int, token: str) -> tuple[int, int] | None:
    """Where ``token`` is between byte offsets ``lo`` and ``hi`` (an operator between its
    operands), skipping comments."""
    gap = source[lo:hi].decode()
    code = re.sub(r"#[^\n]*", lambda m: " " * len(m.group()), gap)
    found = re.search(TOKEN[token], code)
    if found is None:
        return None
    return lo + len(gap[: found.start()].encode()), lo + len(gap[: found.end()].encode())


def mutants_of(path: str, source: bytes, functions: tuple[str, ...] = ()) -> list[Mutant]:
    """Every mutant of one module, in source order (ids are assigned by the caller)."""
    tree = ast.parse(source)
    skipped, scopes, at = _skipped(tree), _scopes(tree), _Offsets(source)
    found: list[tuple[int, int, int, str, str]] = []  # start, end, line, what, text

    def add(lo_hi: tuple[int, int] | None, line: int, what: str, text: str) -> None:
        if lo_hi is not None and source[lo_hi[0] : lo_hi[1]] != text.encode():
            found.append((lo_hi[0], lo_hi[1], line, what, text))

    for node in ast.walk(tree):
        if id(node) in skipped or not hasattr(node, "lineno"):
            continue
        scope, fn = scopes.get(id(node), ("", None))
        if functions and scope not in functions:
            continue
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, op in enumerate(node.ops):
                old, new = FLIPS[type(op)]
                where = _in_gap(source, at.end(operands[i]), at.start(operands[i + 1]), old)
                add(where, node.lineno, f"{old} -> {new}", new)
        elif isinstance(node, ast.BinOp) and type(node.op) in SWAPS:
            old, new = SWAPS[type(node.op)]
            where = _in_gap(source, at.end(node.left), at.start(node.right), old)
            add(where, node.lineno, f"{old} -> {new}", new)
        elif isinstance(node, ast.AugAssign) and type(node.op) in SWAPS:
            old, new = SWAPS[type(node.op)]
            where = _in_gap(source, at.end(node.target), at.start(node.value), old + "=")
            add(where, node.lineno, f"{old}= -> {new}=", new + "=")
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            for step in (1, -1):
                text = str(node.value + step)
                add((at.start(node), at.end(node)), node.lineno, f"{node.value} -> {text}", text)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = source[at.start(node.operand) : at.end(node.operand)].decode()
            add((at.start(node), at.end(node)), node.lineno, "not dropped", f"({inner})")
        elif isinstance(node, ast.Return) and node.value is not None and fn is not None:
            returns = ast.unparse(fn.returns) if fn.returns is not None else ""
            constant = {"int": "0", "float": "0.0", "bool": "False"}.get(returns)
            if constant is not None:
                if returns == "bool" and ast.unparse(node.value) == "False":
                    constant = "True"
                span = (at.start(node.value), at.end(node.value))
                add(span, node.lineno, f"return {constant}", constant)
    found.sort()
    return [Mutant(0, path, line, what, lo, hi, text) for lo, hi, line, what, text in found]


def enumerate_group(group: Group, root: Path = ROOT) -> list[Mutant]:
    out: list[Mutant] = []
    for path in group.files:
        for m in mutants_of(path, (root / path).read_bytes(), group.functions):
            out.append(Mutant(len(out), m.file, m.line, m.what, m.start, m.end, m.text))
    return out


def choose(mutants: list[Mutant], seed: int, sample: int | None) -> list[Mutant]:
    """``sample`` mutants drawn with ``seed`` (all when None or more than there are), by id."""
    if sample is None or sample >= len(mutants):
        return list(mutants)
    return sorted(random.Random(seed).sample(mutants, sample), key=lambda m: m.id)


def _copy(root: Path, into: Path) -> Path:
    """The tree to mutate: this one without its git data, virtual environments and bytecode
    (the mutants run with bytecode writing off, so no module of another mutant is reused)."""
    tree = into / "tree"
    ignore = shutil.ignore_patterns(".git", ".venv*", "__pycache__", ".ruff_cache", "runs")
    shutil.copytree(root, tree, ignore=ignore, symlinks=True)
    return tree


def run_tests(tree: Path, tests: tuple[str, ...], timeout: float) -> tuple[str, float]:
    """``passed``, ``failed`` or ``timeout`` of the tests in ``tree``, and the seconds taken."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("BLAUNCH_TEST_REQUIRE", None)  # a tier's missing package skips, as in a plain run
    present = [t for t in tests if (tree / t.split("::")[0]).exists()]
    cmd = [sys.executable, "-m", "pytest", *present, "-x", "-q", "-p", "no:cacheprovider"]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - start
    took = time.perf_counter() - start
    if done.returncode == 0:
        return "passed", took
    if done.returncode == 5:  # no tests ran: nothing was asserted
        return "no tests", took
    return "failed", took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group", choices=sorted(GROUPS), default="planner")
    parser.add_argument("--seed", type=int, default=66)
    parser.add_argument("--sample", type=int, help="this many mutants (default: every one)")
    parser.add_argument("--only", help="these mutant ids, comma-separated")
    parser.add_argument("--timeout", type=float, help="seconds per mutant (default 5x baseline)")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument("--json", type=Path, help="write every result here")
    args = parser.parse_args()
    group = GROUPS[args.group]
    every = enumerate_group(group)
    chosen = (
        [every[int(i)] for i in args.only.split(",")]
        if args.only
        else choose(every, args.seed, args.sample)
    )
    print(f"group {args.group}: {len(every)} mutants; seed {args.seed}, {len(chosen)} drawn")
    if args.list:
        for m in chosen:
            print(f"  #{m.id} {m.file}:{m.line} {m.what}")
        return
    with tempfile.TemporaryDirectory(prefix="b12x-mutation-") as tmp:
        tree = _copy(ROOT, Path(tmp))
        outcome, base = run_tests(tree, group.tests, 1800)
        if outcome != "passed":
            sys.exit(f"the unmutated tree's tests did not pass ({outcome}); nothing to measure")
        timeout = args.timeout or max(60.0, 5 * base)
        print(f"baseline: the tests pass in {base:.1f} s; timeout per mutant {timeout:.0f} s")
        results = []
        for m in chosen:
            path = tree / m.file
            original = path.read_bytes()
            path.write_bytes(m.apply(original))
            try:
                outcome, took = run_tests(tree, group.tests, timeout)
            finally:
                path.write_bytes(original)
            results.append({**asdict(m), "outcome": outcome, "seconds": round(took, 1)})
            verdict = f"killed ({outcome})" if outcome in ("failed", "timeout") else "survived"
            print(f"  #{m.id} {m.file}:{m.line} {m.what}: {verdict} {took:.1f} s", flush=True)
    survivors = [r for r in results if r["outcome"] in ("passed", "no tests")]
    killed = len(results) - len(survivors)
    rate = killed / len(results) if results else 0.0
    print(f"group {args.group}, seed {args.seed}: killed {killed} of {len(results)} ({rate:.1%})")
    for kind in ("failed", "timeout"):
        if count := sum(r["outcome"] == kind for r in results):
            print(f"  {kind}: {count}")
    print(f"survivors ({len(survivors)}):")
    for r in survivors:
        print(
            f"  #{r['id']} {r['file']}:{r['line']} {r['what']}"
            + ("" if r["outcome"] == "passed" else " (no test ran)")
        )
    if args.json:
        body = {"group": args.group, "seed": args.seed, "drawn": len(chosen), "results": results}
        args.json.write_text(json.dumps(body, indent=1) + "\n")


if __name__ == "__main__":
    main()
