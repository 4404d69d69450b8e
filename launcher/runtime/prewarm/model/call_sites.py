"""Which pointer arguments a kernel's call sites always allocate fresh, read from their source.

The key enumeration varies an int32/int64 pointer's 16-byte alignment when its name says it is
a per-request index array (``query_start_loc``, ``cu_seq_lens``), since the runtime passes
slices of those that start at any request. A call site that passes a tensor it has just made
(``torch.empty``, an arithmetic result, a name bound only to such) passes an aligned one at
every launch, whatever its name: varying it makes keys serving never launches (vLLM 0.26's
``_build_prefill_chunk_metadata_kernel``: 56 keys compiled where 18 are reachable).

Every call site of the kernel in its own module is read (``kernel[grid](...)``); an argument
counts as fresh only where every one of them passes it fresh. No call site found, or a source
that does not parse: nothing is fresh, and the name rules stand.
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
from typing import Any

FRESH_CALLS = frozenset(
    {
        "empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like",
        "arange", "tensor", "clone", "cat", "stack", "cumsum", "empty_strided",
    }
)  # fmt: skip
"""Calls that return a new allocation (``cumsum`` without ``out=``). Not ``to``,
``contiguous``, ``int``, ``long``: those return their input when it already fits."""


def fresh_arguments(source: str, kernel: str) -> dict[str, str]:
    """Parameter name -> how every call site of ``kernel`` in ``source`` makes it, for the
    arguments each of them passes freshly allocated. Positional arguments are named by the
    kernel's own definition in ``source``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    params = _kernel_params(tree, kernel)
    sites = [
        (fn, call)
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
        for call in ast.walk(fn)
        if isinstance(call, ast.Call) and _launches(call, kernel)
    ]
    if params is None or not sites:
        return {}
    fresh: dict[str, str] | None = None
    for fn, call in sites:
        passed = _arguments(call, params)
        if passed is None:
            return {}
        here = {}
        for name, expr in passed.items():
            why = _fresh(expr, fn, call.lineno, 0)
            if why:
                here[name] = why
        fresh = here if fresh is None else {k: v for k, v in fresh.items() if k in here}
    return fresh or {}


@functools.cache
def _module_source(module: str) -> str:
    return inspect.getsource(sys.modules[module])


def of(fn: Any) -> dict[str, str]:
    """``fresh_arguments`` for a ``@triton.jit`` function, from its module's source; empty
    where that cannot be read (the enumeration then goes by the name rules)."""
    try:
        return fresh_arguments(_module_source(fn.fn.__module__), fn.fn.__name__)
    except Exception:  # any failure to read the source leaves the name rules in charge
        return {}


def _kernel_params(tree: ast.Module, kernel: str) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == kernel:
            return [a.arg for a in node.args.posonlyargs + node.args.args]
    return None


def _launches(call: ast.Call, kernel: str) -> bool:
    """``kernel[grid](...)``."""
    f = call.func
    return isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name) and f.value.id == kernel


def _arguments(call: ast.Call, params: list[str]) -> dict[str, ast.expr] | None:
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return None  # *args / **kwargs: which parameter gets what is not in the source
    out = dict(zip(params, call.args, strict=False))
    out.update({k.arg: k.value for k in call.keywords if k.arg})
    return out


def _fresh(expr: ast.expr, fn: ast.AST, line: int, depth: int) -> str:
    """How ``expr`` is a new allocation at ``line`` of ``fn``, or ""."""
    if depth > 4:
        return ""
    if isinstance(expr, ast.BinOp | ast.UnaryOp):
        return "an arithmetic result"
    if isinstance(expr, ast.Call):
        name = (
            expr.func.attr if isinstance(expr.func, ast.Attribute) else getattr(expr.func, "id", "")
        )
        if name in FRESH_CALLS and not any(k.arg == "out" for k in expr.keywords):
            return f"made by {name}()"
        return ""
    if isinstance(expr, ast.Name):
        return _fresh_name(expr.id, fn, line, depth)
    return ""


def _fresh_name(name: str, fn: Any, line: int, depth: int) -> str:
    """A local every binding of which is fresh, and that no parameter binding reaches at
    ``line`` (a top-level assignment before it overrides one). Any other binding (unpacking,
    a loop target, ``with ... as``, ``:=``) makes it unknown: not fresh."""
    bound = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                bound.append(node)
            elif any(name in _names(t) for t in targets if not isinstance(t, ast.Name)):
                return ""  # bound by unpacking
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            if name in _names(node.target):
                return ""
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            if name in _names(node.optional_vars):
                return ""
        elif isinstance(node, ast.NamedExpr) and node.target.id == name:
            return ""
    if not bound:
        return ""  # a global, or a parameter never rebound
    args = fn.args
    parameters = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    if name in parameters and not any(n in fn.body and n.lineno < line for n in bound):
        return ""
    whys = [_fresh(n.value, fn, n.lineno, depth + 1) for n in bound]
    if not all(whys):
        return ""
    return f"{name}: {', '.join(dict.fromkeys(whys))}"


def _names(node: ast.AST) -> set[str]:
    """Names a target binds; a subscript or attribute target binds none (``x[i] = ...``)."""
    if isinstance(node, ast.Subscript | ast.Attribute):
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
