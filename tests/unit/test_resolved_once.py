"""Resolved once: ``resolve()`` runs only where a deployment is made, and everything else is
handed the Deployment. The callers are read from the source (``ast``); the calls are counted
on the commands themselves."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.deployment import UNREAD, resolve
from launcher.profile import load_profile
from tests.conftest import PROFILES
from tests.unit.test_key_dependence import changed

PACKAGE = Path(__file__).resolve().parents[2] / "launcher"
GLM = str(PROFILES / "glm52.yaml")

MAKERS = {
    ("launcher.pipeline", "check"): "validate: the facts gathered for the profile as loaded",
    ("launcher.pipeline", "make_plan"): "the one resolve of a dry run or a launch",
    ("launcher.pipeline", "on_runtime"): "an installed vLLM of another line",
    ("launcher.plan.planner", "_suggest.fits"): "each suggestion trial (other max_num_seqs)",
}
"""Where a deployment is made, each with why: the only callers of ``resolve``."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """The names ``launcher.deployment.resolve`` is bound to in a module, and the names the
    module ``launcher.deployment`` itself is bound to (for ``deployment.resolve(...)``)."""
    functions, modules = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "launcher.deployment":
            functions |= {a.asname or a.name for a in node.names if a.name == "resolve"}
        elif isinstance(node, ast.ImportFrom) and node.module == "launcher":
            modules |= {a.asname or a.name for a in node.names if a.name == "deployment"}
        elif isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "launcher.deployment"}
    return functions, modules


def _calls(path: Path, module: str) -> list[tuple[str, str]]:
    """(module, enclosing function, nested names joined by dots) for each call of resolve."""
    tree = ast.parse(path.read_text(), str(path))
    functions, modules = _resolve_names(tree)
    found: list[tuple[str, str]] = []

    def visit(node: ast.AST, where: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = where
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = (*where, child.name)
            if isinstance(child, ast.Call) and _is_resolve(child.func, functions, modules):
                found.append((module, ".".join(where) or "<module>"))
            visit(child, inner)

    visit(tree, ())
    return found


def _is_resolve(func: ast.expr, functions: set[str], modules: set[str]) -> bool:
    if isinstance(func, ast.Name):
        return func.id in functions
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "resolve"
        and ast.unparse(func.value) in modules
    )


def test_resolve_is_called_only_where_a_deployment_is_made():
    found = {
        call
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "deployment.py"
        for call in _calls(path, _module_name(path))
    }
    assert found == set(MAKERS), (
        f"resolve() called elsewhere: {sorted(found - set(MAKERS))}; "
        f"no longer called: {sorted(set(MAKERS) - found)}: hand the Deployment down instead"
    )


def test_the_caller_list_sees_an_aliased_or_module_call(tmp_path):
    source = tmp_path / "probe.py"
    source.write_text(
        "from launcher.deployment import resolve as r\n"
        "from launcher import deployment\n"
        "def f(p):\n    return r(p)\n"
        "class C:\n    def g(self, p):\n        return deployment.resolve(p)\n"
        "def h(x):\n    return x.resolve()\n"
    )
    names = [where for _, where in _calls(source, "probe")]
    assert names == ["f", "g"]  # a method reads as its own name; Path.resolve() is not one


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # unvalidated values
@pytest.mark.parametrize("key", [".".join(k) for k in UNREAD])
def test_a_profile_differing_in_an_unread_key_has_the_same_deployment(key):
    """``with_profile`` relabels a deployment for such a profile: no derived value reads the
    key (it changes here, each key of a section one by one, and resolves again to the same
    values and reasons)."""
    for path in (GLM, str(PROFILES / "glm52-dcp2.yaml")):
        p = load_profile(path).profile
        for leaf, other in changed(p, tuple(key.split("."))):
            again, relabelled = resolve(other), resolve(p).with_profile(other)
            assert again == relabelled and again.why == relabelled.why, leaf


@pytest.fixture
def counted(monkeypatch) -> list[str]:
    """Every call of ``resolve``, wherever the module that made it imported it from."""
    import importlib
    import sys

    import launcher.deployment as deployment

    for module, _ in MAKERS:  # imported now, so that their binding of resolve is patched
        importlib.import_module(module)
    real = deployment.resolve
    calls: list[str] = []

    def counting(p):
        calls.append(p.name)
        return real(p)

    for module in [m for n, m in sys.modules.items() if n.startswith("launcher")]:
        if getattr(module, "resolve", None) is real:
            monkeypatch.setattr(module, "resolve", counting)
    return calls


@pytest.fixture
def planned(monkeypatch) -> list[bool]:
    """Every plan the planner makes (``suggest`` of each: False for a search's trials)."""
    from launcher.plan import planner

    real = planner._plan
    plans: list[bool] = []

    def counting(profile, inputs, *, suggest):
        plans.append(suggest)
        return real(profile, inputs, suggest=suggest)

    monkeypatch.setattr(planner, "_plan", counting)
    return plans


def _cli(*args: str, code: int = 0) -> None:
    from launcher.cli import cli

    out = CliRunner().invoke(cli, list(args))
    assert out.exit_code == code, out.output


def test_a_dry_run_that_fits_resolves_once(counted, planned):
    _cli(GLM, "--dry-run", "--json", "--no-calibration")
    assert (len(counted), planned) == (1, [True])


def test_a_dry_run_that_does_not_fit_resolves_once_per_profile_it_plans(counted, planned):
    """The plan, then each suggestion trial (fewer sequences: other capture sizes)."""
    _cli(GLM, "--dry-run", "--no-calibration", "--set", "memory.kv_tokens=3000000", code=3)
    assert len(planned) > 1 and len(counted) == len(planned), (counted, planned)


def test_a_sweep_resolves_once_per_combination(counted, planned):
    """Its context-length searches plan more, on each combination's own deployment."""
    _cli("sweep", GLM, "--json", "--no-calibration", "--vary", "serving.max_num_seqs=1,2,4")
    assert len(counted) == 3 and len(planned) > 3, (counted, planned)


def test_prewarm_list_resolves_once(counted):
    _cli("prewarm", GLM, "--list")
    assert len(counted) == 1, counted
