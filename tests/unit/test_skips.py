"""Every skip goes through the tier machinery (tests/conftest.py ``need``): a tier that was
asked for fails instead of skipping, and the summary names the reason."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

RAW = {"skip", "importorskip"}


def raw_skips(path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.relative_to(ROOT)}:{node.lineno} pytest.{node.func.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in RAW
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "pytest"
    ]


def test_no_test_skips_outside_the_tier_machinery():
    machinery = ROOT / "tests" / "conftest.py"
    found = [
        hit
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if path != machinery
        for hit in raw_skips(path)
    ]
    assert found == [], "use tests.conftest need / need_module / need_serving:\n" + "\n".join(found)


def test_the_check_sees_a_raw_skip(tmp_path):
    bad = ROOT / "tests" / "unit" / "_raw_skip_probe.py"
    try:
        bad.write_text("import pytest\n\ndef test_x():\n    pytest.skip('no')\n")
        assert raw_skips(bad) == ["tests/unit/_raw_skip_probe.py:4 pytest.skip"]
    finally:
        bad.unlink()
