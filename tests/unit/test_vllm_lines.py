"""A new vLLM line is one entry in ``VLLM_LINES``: the schema, inference, the probe, the
rules, the deployment, b12x sizing and the container entrypoint all see it, no other edit."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from launcher.deployment import resolve
from launcher.errors import ProfileError
from launcher.plan.b12x_sizing import ckv_gather
from launcher.profile import load_profile
from launcher.profile.vllm_asks import asks_of
from launcher.vllm import can_serve, capabilities, lines
from launcher.vllm.lines import VLLM_LINES, VllmLine
from tests.conftest import PROFILES, ROOT

NEW = VllmLine(
    name="test-fork",
    title="a fork line made up for this test",
    sparse_mla_backends=("TEST_MLA_SPARSE", "FLASHMLA_SPARSE"),
    kernel_package="b12x",
    exl3=True,
    nvfp4_record="fp8_rope",
    lse_scale="natural",
    warmups=("moe_token_buckets", "serving_batches", "capture_shapes"),
    markers=("v1/test_fork_marker.py",),
    tables=capabilities.fork_tables("test-fork", "TEST_MLA_SPARSE"),
    image="example/test-fork:1",
    gathers_ckv=True,
)
ON_NEW = ("vllm.runtime=test-fork", "vllm.attention_backend=TEST_MLA_SPARSE")


@pytest.fixture
def registered(monkeypatch):
    """The new line, registered last (the most derived: the probe checks it first)."""
    monkeypatch.setitem(VLLM_LINES, NEW.name, NEW)
    return NEW


def test_the_schema_and_the_rules_take_the_new_line(registered):
    p = load_profile(PROFILES / "glm52.yaml", (*ON_NEW, "env.VLLM_B12X_MLA_CKV_GATHER=1")).profile
    assert p.vllm.runtime == "test-fork"
    d = resolve(p)
    assert d.runtime is registered
    assert d.backend_family == "sparse-mla-b12x" and d.block_size == 64
    assert ckv_gather(d) == (p.parallel.decode_context > 1)
    assert lines.line_for("test-fork", "auto") is registered.tables["test-fork"]
    assert "test-fork" in lines.LINES


def test_without_the_entry_the_same_profile_is_refused_naming_the_lines():
    with pytest.raises(ProfileError) as exc:
        load_profile(PROFILES / "glm52.yaml", ("vllm.runtime=test-frok",))
    message = str(exc.value)
    assert "vllm.runtime: Input should be 'auto', 'upstream', 'gilded-gnosis' or" in message
    assert "(got 'test-frok')" in message and "test-fork" not in message


def test_a_misspelt_line_is_refused_with_the_closest_name(registered):
    with pytest.raises(ProfileError) as exc:
        load_profile(PROFILES / "glm52.yaml", ("vllm.runtime=test-frok",))
    assert "did you mean 'test-fork'?" in str(exc.value)


def test_inference_and_the_probe_see_the_new_line(registered, monkeypatch, tmp_path):
    assert lines.infer("TEST_MLA_SPARSE") is registered
    assert lines.infer("FLASHMLA_SPARSE").name == "upstream"  # every line has it
    root = tmp_path / "vllm"
    # It carries Gilded Gnosis's backend file too, as a derived line would.
    for marker in (*registered.markers, *VLLM_LINES["gilded-gnosis"].markers):
        (root / marker).parent.mkdir(parents=True, exist_ok=True)
        (root / marker).write_text("")
    real = importlib.util.find_spec
    fake = SimpleNamespace(submodule_search_locations=[str(root)])
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: fake if name == "vllm" else real(name, *a)
    )
    line, how = can_serve.probe_installed()
    assert line is registered and "test_fork_marker.py" in how


def test_the_entrypoint_names_the_new_lines_image(registered):
    loaded = load_profile(PROFILES / "glm52.yaml", ON_NEW)
    caps = can_serve.Registry(frozenset({"FLASH_ATTN"}), frozenset({"fp8"}), "vLLM x")
    issues, line, unknown = can_serve.on_registry(asks_of(loaded.profile), caps)
    assert len(issues) == 2 and line is registered and not unknown
    assert "VLLM_IMAGE=example/test-fork:1 -t b12x-launch:test-fork" in can_serve.registry_fix(line)


def test_no_module_names_a_line_but_the_registry():
    """Each line's name is written once, in its entry: everything else reads its fields."""
    names = set(VLLM_LINES)
    registry = Path(lines.__file__).resolve()
    # A plan result's default, always written over with the deployment's line.
    allowed = {"launcher/plan/planner.py"}
    found = []
    for path in sorted((ROOT / "launcher").rglob("*.py")):
        if path.resolve() == registry or str(path.relative_to(ROOT)) in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert found == []


def test_a_runtime_inferred_without_a_backend_does_not_print_none():
    # the KV line of the dry run read "runtime upstream (inferred from ... None)"
    line, how = lines.resolve("auto", None)
    assert line == lines.fallback()
    assert how == "inferred from vllm.attention_backend (not set)"
