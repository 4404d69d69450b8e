"""The resolved deployment: each derived value decided once, with its reason, and what the
argv and the plan use is what it holds."""

from __future__ import annotations

import json
from pathlib import Path

from launcher import pipeline
from launcher.deployment import resolve
from launcher.profile import load_profile

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def test_glm52_resolves_with_a_reason_for_each_value():
    d = resolve(load_profile(PROFILES / "glm52.yaml").profile)
    assert (d.block_size, d.why["block_size"]) == (64, "profile serving.block_size")
    assert d.decode_rows == (1, 4, 8, 16, 32)
    assert d.capture_sizes and d.why["capture_sizes"].startswith("auto")
    assert set(d.why) == {
        "runtime",
        "backend_family",
        "block_size",
        "capture_sizes",
        "decode_rows",
        "prewarm",
    }
    assert d.backend_family == "sparse-mla-b12x" and d.sparse_mla


def test_without_a_profile_block_the_backend_decides():
    d = resolve(load_profile(PROFILES / "glm52.yaml", ["~serving.block_size"]).profile)
    assert (d.block_size, d.why["block_size"]) == (64, "the sparse-MLA backend's block")


def test_overrides_change_the_decision_and_its_reason():
    loaded = load_profile(
        PROFILES / "glm52.yaml",
        ["serving.block_size=128", "serving.cudagraph_mode=NONE"],
    )
    d = resolve(loaded.profile)
    assert (d.block_size, d.why["block_size"]) == (128, "profile serving.block_size")
    assert d.capture_sizes == ()
    assert d.why["capture_sizes"].startswith("serving.cudagraph_mode NONE")


def test_the_argv_and_the_plan_use_what_the_deployment_holds():
    planned = pipeline.make_plan(load_profile(PROFILES / "glm52.yaml"))
    d = resolve(planned.loaded.profile)
    argv = planned.command.argv
    assert argv[argv.index("--block-size") + 1] == str(d.block_size)
    compilation = json.loads(argv[argv.index("--compilation-config") + 1])
    assert compilation["cudagraph_capture_sizes"] == list(d.capture_sizes)
    assert planned.plan.kv.layout.block_tokens == d.block_size
    assert planned.plan.kv.runtime == d.runtime.name


def test_the_prewarm_list_appends_the_providers_that_always_run():
    d = resolve(load_profile(PROFILES / "glm52.yaml", ["prewarm.providers=[triton]"]).profile)
    assert d.prewarm == ("triton", "census", "keys")
    off = resolve(load_profile(PROFILES / "glm52.yaml", ["prewarm.enabled=false"]).profile)
    assert off.prewarm == () and off.why["prewarm"].startswith("prewarm off")


BACKENDS = (None, "B12X_MLA_SPARSE", "B12X", "FLASHMLA_SPARSE", "FLASH_ATTN", "TRITON_MLA")
RUNTIMES = ("auto", "upstream", "gilded-gnosis", "b12x-fork")


def _glm52_with(runtime: str, backend: str | None):
    """glm52 on ``runtime`` with ``backend``, or None when the rules refuse the pair."""
    from launcher.errors import ProfileError

    overrides = [f"vllm.runtime={runtime}", "serving.kv_cache_dtype=auto", "~serving.block_size"]
    overrides.append("~model.quantization")  # upstream loads no EXL3
    overrides.append(f"vllm.attention_backend={backend}" if backend else "~vllm.attention_backend")
    try:
        return load_profile(PROFILES / "glm52.yaml", overrides).profile
    except ProfileError:
        return None


def test_the_backend_family_is_decided_once_as_the_planner_and_sizing_did():
    """The family replaces two re-derivations: the planner's ``backend in
    MLA_SPARSE_BACKENDS`` and b12x sizing's ``backend in B12X_BACKENDS and backend in the
    runtime's sparse-MLA backends``; both agree with it on every profile the rules accept."""
    from launcher.plan.b12x_sizing import uses_b12x_attention

    facts = pipeline.make_plan(load_profile(PROFILES / "glm52.yaml")).inputs.facts
    families = {}
    for runtime in RUNTIMES:
        for backend in BACKENDS:
            p = _glm52_with(runtime, backend)
            if p is None:
                continue
            d = resolve(p)
            families[(runtime, backend)] = d.backend_family
            assert d.sparse_mla == (backend in ("B12X_MLA_SPARSE", "B12X", "FLASHMLA_SPARSE"))
            b12x = (
                backend in ("B12X_MLA_SPARSE", "B12X") and backend in d.runtime.sparse_mla_backends
            )
            assert (d.backend_family == "sparse-mla-b12x") == b12x
            assert d.block_size == (64 if d.sparse_mla else 16)
            assert d.why["backend_family"].startswith(f"vllm.attention_backend {backend}")
            assert uses_b12x_attention(d, facts) == b12x
    assert families[("gilded-gnosis", "B12X_MLA_SPARSE")] == "sparse-mla-b12x"
    assert families[("b12x-fork", "B12X")] == "sparse-mla-b12x"
    assert families[("auto", "B12X")] == "sparse-mla-b12x"
    assert families[("upstream", "FLASHMLA_SPARSE")] == "sparse-mla-flashmla"
    assert families[("upstream", "FLASH_ATTN")] == families[("gilded-gnosis", None)] == "dense"
    assert families[("auto", None)] == "dense"
    assert ("upstream", "B12X_MLA_SPARSE") not in families  # the rules refuse these
    assert ("upstream", "B12X") not in families


def test_draft_rows_and_the_b12x_family_are_computed_in_one_place():
    """``max_num_seqs x (1 + MTP)`` is ``rules.draft_rows`` (held as ``Deployment.draft_rows``)
    and b12x's sparse MLA is ``Deployment.b12x_sparse_mla``: no module spells either again
    (they were computed in 9 and re-derived from a ``"B12X"`` prefix in 3)."""
    import re

    package = PROFILES.parent / "launcher"
    spelled = re.compile(r"max_num_seqs \* \(1 \+|startswith\(\"B12X|== \"sparse-mla-b12x\"")
    found = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        for line in path.read_text().splitlines()
        if spelled.search(line)
    ]
    assert sorted(found) == ["deployment.py", "profile/rules.py"], found
    d = resolve(load_profile(PROFILES / "glm52.yaml").profile)
    assert d.draft_rows == 8 * (1 + 3) and max(d.decode_rows) == d.draft_rows
    assert d.b12x_sparse_mla
