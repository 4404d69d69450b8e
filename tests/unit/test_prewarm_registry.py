"""The prewarm registry: built-ins, third-party classes, and what each would compile."""

import pytest

from launcher.deployment import resolve
from launcher.plan.model import load_facts
from launcher.profile import load_profile
from launcher.runtime import prewarm
from launcher.runtime.prewarm import PrewarmContext, UnknownProvider
from tests.conftest import PROFILES


def ctx_for(profile: str, rank: int = 0) -> PrewarmContext:
    p = load_profile(PROFILES / profile).profile
    return PrewarmContext(resolve(p), load_facts(p.model.path, p.model.architecture), rank)


def test_builtins_are_registered_and_load_without_torch():
    assert {"b12x", "vllm", "triton"} <= set(prewarm.available())
    for name in ("b12x", "vllm", "triton"):
        assert prewarm.load(name).name == name


def test_a_provider_can_be_named_by_module_and_class():
    provider = prewarm.load("tests.integration.failing:FailingProvider")
    assert provider.name == "failing"


def test_an_unknown_provider_lists_the_known_ones():
    with pytest.raises(UnknownProvider, match="known: b12x, vllm, triton"):
        prewarm.load("cutlass-magic")


def test_triton_specializations_follow_dcp_and_rank():
    ctx = ctx_for("glm52.yaml", rank=3)
    specs = prewarm.load("triton").specializations(ctx)
    merge = [s for s in specs if s.startswith("correct_attn_out")]
    assert merge == [
        "correct_attn_out N=4 HEAD_DIM=512 is_lse_base_on_e=True out [B, 64, 512] "
        "B in [4, 8, 16, 32], cp_rank=3"
    ]
    # every DCP helper at this rank; the MTP draft's replicated DCP1 filter at rank 0 of 1
    assert all("DCP_RANK=3" in s for s in specs if "DCP_RANK" in s and "DCP_SIZE=1" not in s)
    assert prewarm.load("triton").applies(ctx)
    # without DCP only the MLA seed (mask_empty_context) remains
    dcp1 = prewarm.load("triton").specializations(ctx_for("glm52-dcp1.yaml"))
    assert [s.split()[0] for s in dcp1] == ["mask_empty_context_kernel"]


def test_vllm_warmups_list_the_runtime_entry_points_and_need_the_worker_to_run():
    provider = prewarm.load("vllm")
    ctx = ctx_for("glm52.yaml")
    listed = "\n".join(provider.specializations(ctx))
    assert "sparse_mla_triton_warmup" in listed and "[gilded-gnosis]" in listed
    assert "moe_token_buckets" in listed  # GLM-5.2 is MoE
    assert "needs the vLLM worker" in provider.run(ctx).skipped  # no worker outside one
