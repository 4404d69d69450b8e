"""No module of the launcher reaches into another's private names.

A leading underscore says "this module's own, free to change"; a name another module needs is
public, named and documented where it is defined. Every module under ``launcher/`` is parsed
(``ast``): ``from launcher.x import _name`` fails, and so does ``x._name`` where ``x`` is a
launcher module the file imported. Dunders (``__version__``) are not private.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "launcher"

ALLOWED: dict[tuple[str, str], str] = {}
"""(defining module, private name) pairs still reached from outside, each with why."""


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def private_reaches(path: Path, module: str) -> set[tuple[str, str]]:
    """The (defining module, private name) pairs ``path`` (module ``module``) reaches."""
    tree = ast.parse(path.read_text(), str(path))
    bound: dict[str, str] = {}  # local name -> the launcher module it names
    found: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("launcher."):
                    bound[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module != "launcher" and not node.module.startswith("launcher."):
                continue
            for alias in node.names:
                if _private(alias.name) and node.module != module:
                    found.add((node.module, alias.name))
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)):
            continue
        target = ast.unparse(node.value)
        if target in bound and bound[target] != module:
            found.add((bound[target], node.attr))
    return found


def reaches(root: Path = PACKAGE) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root)
        for pair in private_reaches(path, module):
            out.setdefault(pair, []).append(module)
    return out


def test_no_module_reaches_into_another_modules_private_names():
    wrong = [
        f"{', '.join(importers)} reaches {defining}.{name}"
        for (defining, name), importers in sorted(reaches().items())
        if (defining, name) not in ALLOWED
    ]
    assert not wrong, "make these public where they are defined:\n" + "\n".join(wrong)


def test_every_allowed_private_reach_is_still_there():
    found = reaches()
    stale = [f"{d}.{n}" for d, n in ALLOWED if (d, n) not in found]
    assert not stale, f"no longer reached from outside; drop from ALLOWED: {stale}"


def test_the_check_catches_each_form(tmp_path):
    pkg = tmp_path / "launcher"
    (pkg / "base").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "base" / "__init__.py").write_text("")
    (pkg / "base" / "ids.py").write_text("_own = 1\n__version__ = '1'\n")
    (pkg / "a.py").write_text("from launcher.base.ids import _own, __version__\n")
    (pkg / "b.py").write_text("from launcher.base import ids\nids._own\nids.__version__\n")
    (pkg / "c.py").write_text("import launcher.base.ids\nlauncher.base.ids._own\n")
    (pkg / "d.py").write_text("import launcher.base.ids as ids\nids._own\n")
    (pkg / "e.py").write_text("from launcher.base.ids import _own as own\n")
    found = reaches(pkg)
    assert found == {("launcher.base.ids", "_own"): ["launcher.a", "launcher.b", "launcher.c",
                                                     "launcher.d", "launcher.e"]}  # fmt: skip
