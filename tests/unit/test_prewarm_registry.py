"""The prewarm registry: built-ins, third-party classes, and what each would compile."""

import pytest

from launcher.deployment import PREWARM_ALWAYS, resolve
from launcher.plan.model import load_facts
from launcher.profile import load_profile, prewarm_providers, settings_checks
from launcher.profile.schema import Prewarm, Profile
from launcher.runtime import prewarm
from launcher.runtime.prewarm import PrewarmContext, UnknownProvider
from tests.conftest import PROFILES


def ctx_for(profile: str, rank: int = 0) -> PrewarmContext:
    p = load_profile(PROFILES / profile).profile
    return PrewarmContext(resolve(p), load_facts(p.model.path, p.model.architecture), rank)


def with_providers(*names: str) -> Profile:
    """GLM-5.2's profile listing ``names``, unchecked (the check is what is tested)."""
    p = load_profile(PROFILES / "glm52.yaml").profile
    return p.model_copy(update={"prewarm": p.prewarm.model_copy(update={"providers": list(names)})})


def test_every_name_the_profile_accepts_loads_that_provider():
    """One table for both rooms: each name the settings check lets through is one ``load``
    instantiates, as the class the table names, and the defaults are among them."""
    names = prewarm_providers.available()
    assert {*Prewarm().providers, *PREWARM_ALWAYS} <= set(names)
    assert list(settings_checks.prewarm_providers_known(with_providers(*names))) == []
    for name, target in names.items():
        provider = prewarm.load(name)
        assert provider.name == name
        assert f"{type(provider).__module__}:{type(provider).__qualname__}" == target


def test_a_provider_can_be_named_by_module_and_class():
    provider = prewarm.load("tests.integration.failing:FailingProvider")
    assert provider.name == "failing"


def test_an_unknown_name_is_refused_by_the_check_and_the_loader_alike():
    known = ", ".join(prewarm_providers.available())
    refused = settings_checks.prewarm_providers_known(with_providers("b12x", "cutlass-magic"))
    assert list(refused) == [
        (
            "prewarm.providers.1",
            "unknown prewarm provider 'cutlass-magic' (the workers would fail on it after the "
            f"weights load); known: {known}, or a package.module:Class",
        )
    ]
    with pytest.raises(UnknownProvider) as loading:
        prewarm.load("cutlass-magic")
    assert str(loading.value) == f"unknown prewarm provider 'cutlass-magic'; known: {known}"


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


def test_the_listed_waves_name_the_longest_prompt_and_the_sampler_wave():
    # The sampler's wave goes first: the list once took its short prompt for the long one.
    listed = "\n".join(prewarm.load("vllm").specializations(ctx_for("glm52.yaml")))
    line = next(ln for ln in listed.splitlines() if "waves through vLLM's scheduler" in ln)
    assert "prompts up to 524,280 tokens in 3,072-token chunks" in line
    assert "the longest prompt: 170 prefill chunks" in line and "top_k_top_p" in line
