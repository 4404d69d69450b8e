"""The planner: arithmetic, the minimum over ranks, pins, refusals and sources."""

from dataclasses import replace

import pytest

from launcher.plan.catalog import gpu
from launcher.plan.planner import Measured, plan
from launcher.profile import load_profile
from launcher.units import GiB, MiB
from tests.conftest import MINIMAL, gathered

SOURCES = {"measured", "b12x", "headers", "catalog", "config.json", "estimate", "profile"}


def planned(write, overrides=(), **input_changes):
    loaded = load_profile(write("p.yaml", MINIMAL), list(overrides))
    inputs = replace(gathered(loaded), **input_changes)
    return plan(loaded.profile, inputs)


def test_components_and_kv_fill_the_catalogs_card_in_whole_blocks(write):
    p = planned(write)
    card = gpu("rtx-pro-6000").memory  # the catalog's figure, not one the plan carries
    page = p.kv.layout.page_bytes
    for r in p.ranks:
        assert r.total_bytes == card
        assert sum(c.bytes for c in r.components) + r.kv_bytes == card
        assert r.kv_blocks * page <= r.kv_bytes < (r.kv_blocks + 1) * page  # rounded down
        assert r.kv_blocks == p.kv.blocks_per_rank > 0
        assert all(c.source in SOURCES for c in r.components)
        assert [c.name for c in r.components] == [
            "cuda_context",
            "weights",
            "activation_peak",
            "workspaces",
            "cudagraph_pool",
            "transients",
            "jit_headroom",
            "safety_margin",
        ]
    assert p.fits
    assert p.kv.tokens == p.kv.blocks_per_rank * 64 * 4


def test_every_rank_gets_the_smallest_ranks_blocks(write):
    base = planned(write)
    measured = {
        2: Measured(
            {"workspaces": base.ranks[2].component("workspaces").bytes + 1 * GiB}, "2026-11-30"
        )
    }
    p = planned(write, measured=measured)
    assert p.kv.bounding_rank == 2
    assert {r.kv_blocks for r in p.ranks} == {p.kv.blocks_per_rank}
    assert p.kv.blocks_per_rank < base.kv.blocks_per_rank
    comp = p.ranks[2].component("workspaces")
    assert comp.source == "measured" and "2026-11-30" in comp.detail
    assert p.ranks[0].component("workspaces").source == "estimate"


def test_pipeline_stages_differ_and_the_last_bounds(write):
    """Two stages of TP4 on eight cards (a plan that fits): the last stage holds the MTP layer
    and the LM head, so its ranks keep the least KV room and bound every rank's blocks."""
    sets = ["hardware.count=8", "parallel.tensor=4", "parallel.pipeline=2"]
    p = planned(write, [*sets, "parallel.decode_context=2"])
    assert p.fits and p.kv.blocks_per_rank > 0
    w = [r.component("weights").bytes for r in p.ranks]
    assert len(set(w[:4])) == 1 and len(set(w[4:])) == 1 and w[4] > w[0]
    assert p.kv.bounding_rank in range(4, 8)
    assert all(r.kv_blocks == p.kv.blocks_per_rank for r in p.ranks)  # the engine's minimum


def test_measured_jit_headroom_replaces_the_estimate(write):
    p = planned(
        write, measured={r: Measured({"jit_headroom": 300 * MiB}, "2026-11-30") for r in range(4)}
    )
    assert p.ranks[0].component("jit_headroom").bytes == 300 * MiB
    assert p.ranks[0].component("jit_headroom").source == "measured"


def test_profile_headroom_wins_over_measurement(write):
    p = planned(
        write,
        ["memory.jit_headroom=2GiB"],
        measured={0: Measured({"jit_headroom": 300 * MiB}, "2026-11-30")},
    )
    c = p.ranks[0].component("jit_headroom")
    assert (c.bytes, c.source) == (2 * GiB, "profile")


def test_pinned_tokens_round_up_to_whole_logical_blocks(write):
    p = planned(write, ["memory.kv_tokens=100000"])
    assert p.kv.pinned == "kv_tokens"
    assert p.kv.blocks_per_rank == -(-100000 // 256)
    assert p.kv.tokens >= 100000
    assert all(r.kv_bytes == p.kv.blocks_per_rank * p.kv.layout.page_bytes for r in p.ranks)


def test_pinned_bytes(write):
    p = planned(write, ["memory.kv_cache_bytes=2GiB"])
    assert p.kv.blocks_per_rank == (2 * GiB) // p.kv.layout.page_bytes


def test_a_pin_that_does_not_fit_is_refused(write):
    p = planned(write, ["memory.kv_cache_bytes=50GiB"])
    assert not p.fits
    assert "memory.kv_cache_bytes needs" in p.reasons[0]


def test_too_long_a_context_is_refused_with_the_largest_that_fits(write):
    p = planned(write, ["serving.max_model_len=1048576"])
    assert not p.fits
    assert "less than one max_model_len request" in p.reasons[0]
    assert p.suggestions[0] == f"serving.max_model_len={p.kv.tokens}"
    assert p.kv.tokens < 1048576


def test_fixed_costs_over_the_card(write):
    p = planned(write, ["model.weights_per_rank=94GiB"])
    assert not p.fits
    assert "exceed the card" in p.reasons[0]
    assert p.ranks[0].component("weights").source == "profile"


def test_lower_max_num_seqs_is_suggested_when_it_would_fit(write):
    # weights chosen so the activation and sampler of 8 sequences are just too much
    fits_at = planned(write, ["serving.max_num_seqs=1", "serving.max_num_batched_tokens=2048"])
    spare = fits_at.ranks[
        0
    ].kv_bytes - fits_at.kv.layout.page_bytes * fits_at.kv.layout.blocks_for_tokens(131072)
    weights = fits_at.ranks[0].component("weights").bytes + spare - 1 * MiB
    p = planned(
        write,
        [
            f"model.weights_per_rank={weights}",
            "serving.max_num_seqs=64",
            "serving.max_num_batched_tokens=8192",
        ],
    )
    assert not p.fits
    assert any(s.startswith("serving.max_num_seqs=") for s in p.suggestions)


def test_other_processes_reduce_the_kv(write):
    base = planned(write)
    p = planned(write, ["hardware.reserved_by_others=3GiB"])
    assert p.ranks[0].component("other_processes").bytes == 3 * GiB
    assert base.ranks[0].kv_bytes - p.ranks[0].kv_bytes == 3 * GiB


@pytest.mark.parametrize("gpu_memory", [(90 * GiB, "measured")])
def test_device_memory_overrides_the_catalog(write, gpu_memory):
    p = planned(write, gpu_memory=gpu_memory[0], gpu_memory_source=gpu_memory[1])
    assert p.ranks[0].total_bytes == 90 * GiB and p.total_source == "measured"


@pytest.mark.parametrize("dip_gib", [0.0, 0.25, 0.62, 3.0])
def test_a_measured_serving_dip_is_said_and_moves_neither_the_kv_nor_the_forecast(write, dip_gib):
    """The reserves are held from vLLM's warmup on, so what serving drew on them on an
    earlier boot is information, not a term of the forecast: every reserve counts."""
    dip = int(dip_gib * GiB)
    base = planned(write)
    p = planned(write, measured={r: Measured({}, "2026-12-06", serving_dip=dip) for r in range(4)})
    assert p.kv.blocks_per_rank == base.kv.blocks_per_rank
    for before, after in zip(base.ranks, p.ranks, strict=True):
        assert before.serving_dip is None and after.serving_dip == dip
        assert after.lowest_free == before.lowest_free


def test_the_forecast_is_the_margin_and_the_headroom_s_prewarm_part_to_the_block(write):
    """On the rank that bounds the KV cache, every other component and the blocks come off
    the card: what stays is the margin, the JIT headroom less its late part, and less than
    one block."""
    p = planned(write)
    r = p.ranks[p.kv.bounding_rank]
    headroom = r.component("jit_headroom")
    late = sum(q.bytes for q in headroom.parts if q.name == "late_compiles")
    kept = r.component("safety_margin").bytes + headroom.bytes - late
    assert 0 <= r.lowest_free - kept < p.kv.layout.page_bytes


def test_the_dry_run_says_what_its_lowest_free_forecast_rests_on(write):
    from launcher.report.render import render_table

    calibrated = {r: Measured({}, "2026-12-06", serving_dip=GiB) for r in range(4)}
    est = " ".join(render_table(planned(write), None).split())
    cal = " ".join(render_table(planned(write, measured=calibrated), None).split())
    assert "(estimate: the card less every component at its peak" in est
    assert "holds the activation and transient reserves from vLLM's warmup on" in est
    assert "serving drew 1.00 GiB of those reserves on the boot this plan is" in cal
