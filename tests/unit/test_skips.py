"""Every skip goes through the tier machinery (tests/conftest.py ``need``): a tier that was
asked for fails instead of skipping, and the summary names the reason."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

RAW = {"skip", "importorskip"}
"""``pytest.skip(...)`` and ``pytest.importorskip(...)``."""
MARKS = {"skip", "skipif"}
"""``@pytest.mark.skip`` and ``@pytest.mark.skipif(...)``, as a decorator, in ``pytestmark`` or
in a parameter's ``marks``: a condition decided at collection, which no tier asked for sees."""


def _is_pytest(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "pytest"


def raw_skips(path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        if node.attr in MARKS and isinstance(node.value, ast.Attribute):
            if node.value.attr == "mark" and _is_pytest(node.value.value):
                found.append((node.lineno, f"pytest.mark.{node.attr}"))
        elif node.attr in RAW and _is_pytest(node.value):
            found.append((node.lineno, f"pytest.{node.attr}"))
    return [f"{path.relative_to(ROOT)}:{line} {what}" for line, what in sorted(found)]


MACHINERY = (ROOT / "tests" / "conftest.py", ROOT / "tests" / "container" / "conftest.py")
"""Where skips are decided: ``need`` and the tier summary; the container tier, which runs only
when named (``tests/run tests/container``)."""


def test_no_test_skips_outside_the_tier_machinery():
    found = [
        hit
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if path not in MACHINERY
        for hit in raw_skips(path)
    ]
    assert found == [], "use tests.conftest need / need_module / need_serving:\n" + "\n".join(found)


def test_the_check_sees_every_raw_skip():
    bad = ROOT / "tests" / "unit" / "_raw_skip_probe.py"
    try:
        bad.write_text(
            "import pytest\n"
            "pytestmark = pytest.mark.skipif(True, reason='no')\n"
            "@pytest.mark.skipif(True, reason='no')\n"
            "def test_x():\n    pytest.skip('no')\n"
            "@pytest.mark.skip\n"
            "@pytest.mark.parametrize('a', [pytest.param(1, marks=pytest.mark.skip('no'))])\n"
            "def test_y(a):\n    pytest.importorskip('x')\n"
            "@pytest.mark.xfail(strict=True)\n"  # a strict xfail fails when it passes: not a skip
            "def test_z():\n    assert False\n"
        )
        assert raw_skips(bad) == [
            f"tests/unit/_raw_skip_probe.py:{line} {what}"
            for line, what in [
                (2, "pytest.mark.skipif"),
                (3, "pytest.mark.skipif"),
                (5, "pytest.skip"),
                (6, "pytest.mark.skip"),
                (7, "pytest.mark.skip"),
                (9, "pytest.importorskip"),
            ]
        ]
    finally:
        bad.unlink()
