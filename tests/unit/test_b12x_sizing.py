"""b12x's own sizing (``--b12x-sizing``) and the b12x prewarm provider.

The first tests run without b12x (the plain interpreter); the rest skip unless b12x
and torch import, and run on a CPU: b12x plans are metadata only.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from launcher.deployment import resolve
from launcher.profile import load_profile
from launcher.runtime.prewarm import PrewarmContext, load
from tests.conftest import PROFILES, ROOT, gathered, need_serving

GLM = str(PROFILES / "glm52.yaml")
B12X_PROFILES = ["glm52", "glm52-dcp1", "glm52-dcp2", "deepseek-v32"]
SOURCES = [
    ROOT / "launcher" / "plan" / "b12x_sizing.py",
    ROOT / "launcher" / "runtime" / "prewarm" / "providers" / "b12x.py",
]
B12X_FORK = ("vllm.runtime=b12x-fork", "vllm.attention_backend=B12X")
"""The fork line that runs the b12x package (the shipped profiles target Gilded Gnosis)."""


def context(name: str, *overrides: str, device: str = "cpu") -> PrewarmContext:
    loaded = load_profile(PROFILES / f"{name}.yaml", overrides)
    return PrewarmContext(resolve(loaded.profile), gathered(loaded).facts, device=device)


def fork(name: str) -> PrewarmContext:
    return context(name, *B12X_FORK)


def keyed_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(("B12X_", "CUTE_", "CUTLASS_"))}


# ------------------------------------------------------------------ without b12x


SPECS_SCRIPT = """
import json, sys
from launcher.deployment import resolve
from launcher.plan.inputs import gather
from launcher.runtime.prewarm import PrewarmContext, load
from launcher.profile import load_profile
loaded = load_profile(sys.argv[1], sys.argv[2:])
d = resolve(loaded.profile)
ctx = PrewarmContext(d, gather(loaded, d).facts)
provider = load("b12x")
print(json.dumps({"applies": provider.applies(ctx), "specs": provider.specializations(ctx),
                  "heavy": [m for m in ("torch", "b12x", "vllm") if m in sys.modules]}))
"""


def test_specializations_import_neither_torch_nor_b12x():
    out = subprocess.run(
        [sys.executable, "-c", SPECS_SCRIPT, GLM, *B12X_FORK],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    assert data["heavy"] == []
    assert data["applies"] is True
    # The runtime's Caps: fp8 RoPE, natural LSE, decode rows only at the counts it runs.
    assert data["specs"][:4] == [
        "sparse_mla decode rows={1, 4, 8, 16, 32} heads=64 chunks=32 kv=nvfp4_ds_mla "
        "fp8-rope lse natural",
        "sparse_mla extend T=3072 heads=64",
        "dsa_indexer decode rows={1, 4, 8, 16, 32} heads=32 pages=2048 top-2048",
        "dsa_indexer prefill T=3072 pages=2048",
    ]
    assert data["specs"][4].startswith("fused_moe exl3 T in {4, 8, 16, 32, 3072} experts=256")


def test_applies_only_where_b12x_serves():
    provider = load("b12x")
    assert [provider.applies(fork(n)) for n in B12X_PROFILES] == [True] * 4
    assert not provider.applies(context("kimi-k2"))
    assert not provider.applies(context("tiny-cpu"))
    assert provider.specializations(context("kimi-k2")) == []


@pytest.mark.parametrize("name", B12X_PROFILES)
def test_gilded_gnosis_runs_sparkinfer_so_the_provider_says_why(name):
    provider = load("b12x")
    ctx = context(name)
    assert not provider.applies(ctx)
    reason = (
        "runtime gilded-gnosis runs sparkinfer; its plans are prewarmed through the "
        "runtime provider"
    )
    assert provider.why_not(ctx) == reason
    assert provider.run(ctx).skipped == reason


def test_caps_follow_the_runtime_not_the_env():
    """b12x-fork always stores fp8 RoPE for GLM-DSA nvfp4; Gilded Gnosis reads KV_FP8_ROPE."""
    from launcher.plan.b12x_sizing import specs, uses_b12x_attention

    off = ("env.KV_FP8_ROPE=0",)
    on_fork = specs(context("glm52", *B12X_FORK, *off).deployment, fork("glm52").facts)
    assert on_fork.mla_decode[0].fp8_rope and on_fork.mla_decode[0].lse_scale == "natural"
    gg = context("glm52", *off)
    assert not specs(gg.deployment, gg.facts).mla_decode[0].fp8_rope
    assert specs(gg.deployment, gg.facts).mla_decode[0].lse_scale == "natural"
    assert uses_b12x_attention(gg.deployment, gg.facts)  # both fork backends are b12x's
    assert uses_b12x_attention(fork("glm52").deployment, gg.facts)
    up = context("deepseek-v32", "vllm.attention_backend=FLASHMLA_SPARSE", "vllm.release=0.33")
    assert not uses_b12x_attention(up.deployment, up.facts)


@pytest.mark.parametrize(
    ("overrides", "heads"),
    [
        ((), 16),  # Gilded Gnosis, DCP4, VLLM_B12X_MLA_CKV_GATHER=1: heads / TP
        (("env.VLLM_B12X_MLA_CKV_GATHER=0",), None),
        (("parallel.decode_context=1", "serving.max_model_len=131072"), None),
        (B12X_FORK, None),  # the b12x-package line gathers only for GLM5Next
    ],
)
def test_full_ckv_local_head_extend_plan(overrides, heads):
    from launcher.plan.b12x_sizing import describe, specs

    ctx = context("glm52", *overrides)
    s = specs(ctx.deployment, ctx.facts)
    assert (s.mla_ckv_extend.heads if s.mla_ckv_extend else None) == heads
    if heads:
        assert (s.mla_ckv_extend.rows, s.mla_ckv_extend.mode) == (3072, "extend")
        assert "sparse_mla extend T=3072 heads=16 (full-CKV gather, local heads)" in describe(s)


def test_every_spec_is_in_exactly_one_group():
    """``groups`` is the one enumeration sizing, the list and the prewarm read: a field of
    ``Specs`` it leaves out would be sized by none of them."""
    from dataclasses import fields

    from launcher.plan.b12x_sizing import groups, specs

    ctx = context("glm52")  # full-CKV gather on: every attention group
    exl3 = context("glm52", "model.quantization=exl3")
    for s in (specs(ctx.deployment, ctx.facts), specs(exl3.deployment, exl3.facts)):
        held = [x for f in fields(s) for x in _as_tuple(getattr(s, f.name))]
        grouped = [x for g in groups(s) for x in g.specs]
        assert grouped == held
        assert len({g.component for g in groups(s)}) == len(groups(s))


def _as_tuple(value):
    return value if isinstance(value, tuple) else (() if value is None else (value,))


def test_decode_rows_are_the_runtime_token_counts():
    from launcher.deployment import resolve

    def decode_rows(p):
        return resolve(p).decode_rows

    assert decode_rows(context("glm52").profile) == (1, 4, 8, 16, 32)
    no_graphs = context("glm52", "serving.cudagraph_mode=NONE").profile
    assert decode_rows(no_graphs) == tuple(range(1, 33))
    no_mtp = context(
        "glm52",
        "speculative.method=none",
        "speculative.tokens=0",
        "serving.cudagraph_capture_sizes=[1, 2, 4, 8]",
    ).profile
    assert decode_rows(no_mtp) == (1, 2, 4, 8)


def test_b12x_sizing_without_b12x_exits_1_with_the_fix():
    script = (
        "import sys; sys.modules['b12x'] = None\n"
        "from launcher.cli import main\n"
        f"sys.argv = ['b12x-launch', {GLM!r}, '--json', '--b12x-sizing']\n"
        "main()\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    assert "--b12x-sizing needs b12x and torch: pip install '.[serve]' in the" in out.stderr
    assert "Traceback" not in out.stderr


def test_no_b12x_cute_or_cutlass_variable_is_set():
    for path in SOURCES:
        text = Path(path).read_text()
        assert "os.environ" not in text and "putenv" not in text, path


def test_late_compile_log_reaches_the_callback():
    from launcher.runtime.prewarm.providers.b12x import B12xProvider

    seen = []
    provider = B12xProvider()
    ctx = context("glm52")
    provider.freeze(ctx, lambda kernel, detail: seen.append((kernel, detail)))
    try:
        logging.getLogger("b12x.preparation").warning(
            "%s: %s%s was not prepared before its first use; preparing its default "
            "configuration. Repeated matching declarations are logged at DEBUG.",
            "attention.sparse_mla",
            "SparseMlaQuery",
            " (max_q_rows=7)",
        )
    finally:
        provider.close()
    assert seen and seen[0][0] == "attention.sparse_mla"
    assert "max_q_rows=7" in seen[0][1]


# ------------------------------------------------------------------ with b12x


@pytest.fixture
def b12x():
    need_serving("torch")
    return need_serving("b12x")


@pytest.mark.parametrize("name", B12X_PROFILES)
def test_provider_builds_plans_and_sizing_is_b12x(b12x, name):
    from launcher.plan.b12x_sizing import size_workspaces, specs

    ctx = fork(name)
    before = keyed_env()
    groups = load("b12x").build_requests(ctx)
    s = specs(ctx.deployment, ctx.facts)
    assert len(groups["sparse_mla"]) == len(s.mla_decode) + 1
    assert len(groups["dsa_indexer"]) == len(s.indexer_decode) + 1
    assert groups["fused_moe"] == []  # needs the model's prepared experts
    for request in groups["sparse_mla"] + groups["dsa_indexer"]:
        assert request.plan.memory_requirements().scratch_nbytes > 0
    parts = size_workspaces(ctx.deployment, ctx.facts)
    b12x_parts = [c for c in parts if c.source == "b12x"]
    names = {c.name for c in b12x_parts}
    assert {"b12x_sparse_mla_decode", "b12x_sparse_mla_extend"} <= names
    assert {"b12x_dsa_indexer_decode", "b12x_dsa_indexer_prefill"} <= names
    assert ("b12x_fused_moe" in names) == (ctx.profile.model.quantization == "exl3")
    assert all(c.bytes > 0 and c.shared for c in b12x_parts)
    assert keyed_env() == before  # b12x's compile key reads these
    assert [c.name for c in parts if c.source != "b12x"] == (
        ["dcp_buffers"] if ctx.profile.parallel.decode_context > 1 else []
    )


def test_sparse_mla_matches_the_formula_for_glm52_tp4_dcp4(b12x):
    from launcher.plan.b12x_sizing import mla_plan, size_workspaces, specs
    from launcher.plan.estimates import sparse_mla_scratch

    ctx = fork("glm52")
    s = specs(ctx.deployment, ctx.facts)
    assert (s.mla_extend.heads, s.mla_extend.rows, s.mla_extend.chunks) == (64, 3072, 32)
    extend = mla_plan(s.mla_extend, "cpu").memory_requirements().scratch_nbytes
    assert extend == sparse_mla_scratch(3072, 64, 512, 32, decode=False) == 202_114_048
    decode = mla_plan(s.mla_decode[-1], "cpu").memory_requirements().scratch_nbytes
    assert decode == sparse_mla_scratch(32, 64, 512, 32, decode=True) == 67_382_272
    parts = {c.name: c for c in size_workspaces(ctx.deployment, ctx.facts)}
    assert parts["b12x_sparse_mla_extend"].bytes == extend
    assert (
        "sparse_mla.plan(mode=extend, T=3072, heads 64)" in parts["b12x_sparse_mla_extend"].detail
    )


def test_cli_b12x_sizing_labels_workspace_parts_b12x(b12x):
    from launcher.cli import cli

    result = CliRunner().invoke(cli, [GLM, "--json", "--b12x-sizing"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    for rank in data["ranks"]:
        parts = rank["components"]["workspaces"]["parts"]
        assert {k: v["source"] for k, v in parts.items() if k != "dcp_buffers"} == {
            k: "b12x" for k in parts if k != "dcp_buffers"
        }
        assert len(parts) == 7 and parts["dcp_buffers"]["source"] == "estimate"
        # Gilded Gnosis with CKV gather: the 16-head local extend plan is sized too.
        assert "heads 16: full-CKV gather" in parts["b12x_sparse_mla_ckv_extend"]["detail"]
        shared = [v["bytes"] for k, v in parts.items() if k != "dcp_buffers"]
        assert rank["components"]["workspaces"]["bytes"] == (
            max(shared) + parts["dcp_buffers"]["bytes"]
        )


class _Recording:
    """A prepared state whose prime/run are recorded instead of launched (no GPU here)."""

    def __init__(self, real):
        self.real, self.calls = real, []

    def __getattr__(self, name):
        return getattr(self.real, name)

    def prime(self, binding, **_):
        self.calls.append("prime")

    def run(self, binding, **_):
        self.calls.append("run")


def test_prepare_calls_bind_against_b12x_layouts(b12x):
    """The synthetic tensors pass b12x's own bind checks (the launch itself needs SM12x)."""
    from b12x.attention.dsa_indexer import _preparation as dsa
    from b12x.attention.dsa_indexer.scratch import plan_indexer_scratch

    from launcher.plan.b12x_sizing import indexer_plan, mla_plan, specs
    from launcher.runtime.prewarm.providers.b12x import _index_call, _mla_call

    ctx = fork("glm52")
    s = specs(ctx.deployment, ctx.facts)
    device = SimpleNamespace(identity=SimpleNamespace(sm_count=188), ordinal=None)
    for m in (s.mla_decode[2], s.mla_extend):
        state = _Recording(mla_plan(m, "cpu")._materialize(None, device))
        _mla_call(m, "cpu")(state).run()
        assert state.calls == ["prime", "run"]
    for i in (s.indexer_decode[2], s.indexer_prefill):
        plan = indexer_plan(i, "cpu")
        config = plan.contract.configure(plan.query, device=None).default
        caps = dsa._scratch_caps(plan.query, device=plan._device, config=config)
        layout = plan_indexer_scratch(caps, fused_merge=config.fused_merge)
        state = _Recording(dsa._DsaIndexerState(layout, config, {}))
        _index_call(i, "cpu")(state).run()
        assert state.calls == ["run"]


def test_run_contains_a_group_that_cannot_prepare(b12x):
    """On a CPU b12x refuses to prepare: each group fails alone and is reported."""
    lines = []
    ctx = fork("glm52")
    ctx.log = lines.append
    provider = load("b12x")
    result = provider.run(ctx)
    assert result.provider == "b12x" and result.warmed == 0
    assert result.skipped.startswith("sparse_mla: ") and "dsa_indexer: " in result.skipped
    assert provider.sessions == [] and len(lines) == 2
    assert result.specializations == provider.specializations(ctx)


def test_strict_freeze_reports_a_frozen_resolution_then_raises(b12x):
    from b12x import KernelResolutionFrozenError

    ctx = context("glm52", "prewarm.strict_jit=true")

    def step():
        raise KernelResolutionFrozenError(
            "b12x kernel resolution is frozen; refusing cute.compile; target=pkg.kernel; key=k"
        )

    ctx.model_runner = SimpleNamespace(execute_model=step)
    seen = []
    provider = load("b12x")
    provider.freeze(ctx, lambda kernel, detail: seen.append(kernel), strict=True)
    try:
        with pytest.raises(KernelResolutionFrozenError):
            ctx.model_runner.execute_model()
    finally:
        provider.close()
    assert seen == ["pkg.kernel"]


@pytest.mark.parametrize(
    ("cc", "name", "device", "note"),
    [
        ((9, 0), "NVIDIA H200", "cpu", "cpu device: SM-count-dependent routes may undercount"),
        ((12, 0), "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "cuda:0", "sized on"),
        ((12, 0), "NVIDIA GeForce RTX 5090", "cuda:0", "not the profile's rtx-pro-6000"),
    ],
)
def test_sizing_device_plans_on_a_local_sm12x_gpu_only(b12x, monkeypatch, cc, name, device, note):
    import torch

    from launcher.plan.b12x_sizing import sizing_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=None: cc)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=None: name)
    got_device, got_note = sizing_device("rtx-pro-6000")
    assert got_device == device and note in got_note
