"""A vLLM release read as source, never imported: modules, their top-level names, classes
with their members (methods, class attributes, ``self.x`` set in any method, through the
bases the release defines), the parameter names of a function or method, and the attributes
a module sets on objects it does not define (``x.attr = ...``, ``setattr(x, "attr", ...)``,
``x.register_parameter("attr", ...)``).

``scan`` reads each supported release's wheel with it; ``check`` reads the installed vLLM's
files with it, so an image build and a worker answer the same question the table answers.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

Node = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements at module (or class) level, through ``if``/``try``/``with`` blocks."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, ast.If):
            out += _top_level(stmt.body) + _top_level(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            out += _top_level(stmt.body) + _top_level(stmt.orelse)
            for handler in stmt.handlers:
                out += _top_level(handler.body)
            out += _top_level(stmt.finalbody)
        elif isinstance(stmt, ast.With):
            out += _top_level(stmt.body)
    return out


def _targets(node: ast.AST) -> list[ast.expr]:
    """What an assignment binds, through tuples, lists and starred targets (``[]`` for any
    other node): names, and attributes such as ``x.attr``."""
    if isinstance(node, ast.Assign):
        pending = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        pending = [node.target]
    else:
        return []
    out: list[ast.expr] = []
    while pending:
        target = pending.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            pending += target.elts
        elif isinstance(target, ast.Starred):
            pending.append(target.value)
        else:
            out.append(target)
    return out


def _assigned(stmt: ast.stmt) -> list[str]:
    """Names a statement binds; not ``X.attr = ...`` (that binds no X). An augmented
    assignment rebinds nothing new."""
    if isinstance(stmt, ast.AugAssign):
        return []
    return [t.id for t in _targets(stmt) if isinstance(t, ast.Name)]


def params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    """Parameter names in order: ``*args`` and ``**kwargs`` keep their stars."""
    a = node.args
    names = [p.arg for p in (*a.posonlyargs, *a.args)]
    if a.vararg:
        names.append("*" + a.vararg.arg)
    names += [p.arg for p in a.kwonlyargs]
    if a.kwarg:
        names.append("**" + a.kwarg.arg)
    return tuple(names)


def _sets(node: ast.AST, attr: str) -> bool:
    """Whether ``node`` sets ``attr`` on some object: ``x.attr = ...`` (annotated,
    augmented, or among a tuple's targets), ``setattr(x, "attr", ...)``, or
    ``x.register_parameter("attr", ...)`` (torch's way of setting a module's weight).
    A read (``x.attr``, ``getattr(x, "attr")``) is not one."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id == "setattr":
            named = node.args[1:2]
        elif isinstance(func, ast.Attribute) and func.attr == "register_parameter":
            named = node.args[:1]
        else:
            return False
        return any(isinstance(a, ast.Constant) and a.value == attr for a in named)
    return any(isinstance(t, ast.Attribute) and t.attr == attr for t in _targets(node))


@dataclass
class Module:
    name: str
    tree: ast.Module
    is_package: bool = False

    @cached_property
    def names(self) -> dict[str, ast.stmt]:
        """Each top-level name and the statement that binds it (the last one wins)."""
        out: dict[str, ast.stmt] = {}
        for stmt in _top_level(self.tree.body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out[stmt.name] = stmt
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for alias in stmt.names:
                    out[alias.asname or alias.name.split(".")[0]] = stmt
            else:
                for name in _assigned(stmt):
                    out[name] = stmt
        return out

    @cached_property
    def star_sources(self) -> list[str]:
        """The vLLM modules ``from X import *`` brings in (their names are this module's)."""
        return [
            source
            for stmt in _top_level(self.tree.body)
            if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names)
            for source in [self._absolute(stmt)]
            if source.startswith("vllm")
        ]

    def _absolute(self, stmt: ast.ImportFrom) -> str:
        if not stmt.level:
            return stmt.module or ""
        package = self.name.split(".")
        if not self.is_package:
            package = package[:-1]
        package = package[: len(package) - (stmt.level - 1)]
        return ".".join([*package, stmt.module] if stmt.module else package)

    def imported_from(self, name: str) -> str | None:
        """The vLLM module a top-level ``name`` is imported from (None: defined here, or not
        from vLLM)."""
        stmt = self.names.get(name)
        if not isinstance(stmt, ast.ImportFrom):
            return None
        base = self._absolute(stmt)
        return base if base.startswith("vllm") else None


@dataclass
class Release:
    """One release's ``vllm`` package, read from ``root`` (the directory holding ``vllm/``)."""

    root: Path
    _modules: dict[str, Module | None] = field(default_factory=dict)

    def module(self, name: str) -> Module | None:
        if name not in self._modules:
            base = self.root.joinpath(*name.split("."))
            path = next(
                (p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None
            )
            tree = None
            if path is not None:
                try:
                    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
                except (SyntaxError, UnicodeDecodeError):
                    tree = None
            package = path is not None and path.name == "__init__.py"
            self._modules[name] = Module(name, tree, package) if tree is not None else None
        return self._modules[name]

    def find_class(
        self, module: str, name: str, depth: int = 0
    ) -> tuple[Module, ast.ClassDef] | None:
        found = self.module(module)
        if found is None or depth > 4:
            return None
        stmt = found.names.get(name)
        if isinstance(stmt, ast.ClassDef):
            return found, stmt
        sources = [found.imported_from(name)] if stmt is not None else found.star_sources
        hits = (self.find_class(s, name, depth + 1) for s in sources if s)
        return next((hit for hit in hits if hit is not None), None)

    def assignment(self, module: str, attr: str) -> ast.AST | None:
        """The first statement or call in ``module`` (anywhere: a method, a closure a
        decorator returns, module level) that sets ``attr`` on an object; None where none
        does. Only ``module`` itself is read: the entry names where vLLM sets it."""
        found = self.module(module)
        if found is None:
            return None
        return next((node for node in ast.walk(found.tree) if _sets(node, attr)), None)

    def member(self, module: str, path: str) -> ast.AST | None:
        """``path`` (``name`` or ``Class.member``) in ``module``: the binding node, or None.
        A member is looked for in the class, then in the bases the release defines."""
        first, _, rest = path.partition(".")
        found = self.module(module)
        if found is None:
            return None
        if not rest:
            stmt = found.names.get(first)
            if stmt is None:  # from .x import *: the name is x's
                hits = (self.member(source, first) for source in found.star_sources)
                return next((hit for hit in hits if hit is not None), None)
            source = found.imported_from(first)
            if source and source != module:  # re-exported: the definition, where it is vLLM's
                deeper = self.member(source, first)
                return deeper if deeper is not None else stmt
            return stmt
        cls = self.find_class(module, first)
        return self._class_member(*cls, rest, 0) if cls else None

    def _class_member(
        self, module: Module, cls: ast.ClassDef, name: str, depth: int
    ) -> ast.AST | None:
        for stmt in _top_level(cls.body):
            if (
                isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and stmt.name == name
            ):
                return stmt
            if name in _assigned(stmt):
                return stmt
        for node in ast.walk(cls):  # self.name = ... in any method
            target = node.target if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else None
            targets = node.targets if isinstance(node, ast.Assign) else [target] if target else []
            for t in targets:
                if (
                    isinstance(t, ast.Attribute)
                    and t.attr == name
                    and isinstance(t.value, ast.Name)
                    and t.value.id == "self"
                ):
                    return node
        if depth > 6:
            return None
        for base in cls.bases:
            base_name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
            if base_name is None:
                continue
            found = self.find_class(module.name, base_name)
            if found is not None:
                hit = self._class_member(*found, name, depth + 1)
                if hit is not None:
                    return hit
        return None
