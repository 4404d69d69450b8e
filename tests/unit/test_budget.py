import pytest

from launcher.runtime.budget import BudgetError, BudgetInputs, kv_budget
from launcher.units import GiB, MiB


def cpu(**kw):
    base = dict(
        platform="cpu",
        vllm_available=100 * MiB,
        jit_headroom=16 * MiB,
        safety_margin=32 * MiB,
        planned_kv=52 * MiB,
    )
    return BudgetInputs(**{**base, **kw})


def test_cpu_subtracts_the_reserves_from_vllms_figure():
    b = kv_budget(cpu())
    assert b.bytes == 52 * MiB == cpu().planned_kv
    assert b.reserved == {"jit_headroom": 16 * MiB, "safety_margin": 32 * MiB}


def test_gpu_uses_physical_free_memory_and_every_reserve():
    i = BudgetInputs(
        platform="cuda",
        vllm_available=6 * GiB,
        jit_headroom=1 * GiB,
        safety_margin=512 * MiB,
        planned_kv=5 * GiB,
        free_after_profile=8 * GiB,
        peak_activation=600 * MiB,
        cudagraph=200 * MiB,
    )
    b = kv_budget(i)
    assert b.bytes == 8 * GiB - 600 * MiB - 200 * MiB - 1 * GiB - 512 * MiB
    assert "measured free" in b.basis


def test_gpu_holds_back_the_plans_transients_and_records_them():
    base = dict(
        platform="cuda",
        vllm_available=6 * GiB,
        jit_headroom=1 * GiB,
        safety_margin=512 * MiB,
        planned_kv=5 * GiB,
        free_after_profile=8 * GiB,
    )
    without = kv_budget(BudgetInputs(**base))
    held = kv_budget(BudgetInputs(**base, transients=486 * MiB))
    assert without.bytes - held.bytes == 486 * MiB
    assert held.reserved["transients"] == 486 * MiB
    assert "transients" not in kv_budget(cpu(transients=486 * MiB)).reserved


def test_pinned_is_exact_when_it_fits():
    assert kv_budget(cpu(pinned_kv=40 * MiB)).bytes == 40 * MiB


def test_pinned_that_no_longer_fits_is_refused_with_the_fix():
    with pytest.raises(BudgetError, match=r"lower memory\.kv_tokens"):
        kv_budget(cpu(pinned_kv=60 * MiB))


def test_nothing_left_is_an_error():
    with pytest.raises(BudgetError, match="no memory left"):
        kv_budget(cpu(vllm_available=40 * MiB))


def test_a_calibrated_plan_is_the_contract_when_it_fits():
    base = dict(
        platform="cuda",
        vllm_available=0,
        jit_headroom=64 * MiB,
        safety_margin=512 * MiB,
        planned_kv=10 * GiB,
        free_after_profile=12 * GiB,
        peak_activation=100 * MiB,
        cudagraph=80 * MiB,
    )
    room = 12 * GiB - (64 + 512 + 100 + 80) * MiB
    assert kv_budget(BudgetInputs(**base)).bytes == room  # a plan of estimates: all the room
    got = kv_budget(BudgetInputs(**base, calibrated=True))
    assert got.bytes == 10 * GiB and "calibrated plan" in got.basis
    # less room than the calibrated plan said: what fits, never more
    short = kv_budget(BudgetInputs(**{**base, "planned_kv": 12 * GiB}, calibrated=True))
    assert short.bytes == room
