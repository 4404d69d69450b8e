"""The qualified KV size: low-water free memory -> whole blocks that leave the margin."""

import pytest

from launcher.qualify.ceiling import NoKvLeft, RankObservation, qualified_kv
from launcher.units import GiB, MiB

PAGE = 2 * MiB
MARGIN = 512 * MiB


def obs(rank, kv, low, page=PAGE):
    return RankObservation(rank, kv, low, page)


def test_spare_free_memory_above_the_margin_becomes_kv():
    c = qualified_kv([obs(0, 10 * GiB, MARGIN + 1 * GiB)], MARGIN, block_tokens=64)
    assert c.kv_bytes == 11 * GiB
    assert c.blocks == 11 * GiB // PAGE
    assert c.tokens == c.blocks * 64
    assert c.headroom == {0: 1 * GiB}


def test_the_rank_with_the_least_headroom_bounds_every_rank():
    ranks = [
        obs(0, 10 * GiB, MARGIN + 1 * GiB),
        obs(1, 10 * GiB, MARGIN + 300 * MiB),
        obs(2, 10 * GiB, MARGIN + 2 * GiB),
    ]
    c = qualified_kv(ranks, MARGIN, block_tokens=64)
    assert c.bounding_rank == 1
    assert c.blocks == (10 * GiB + 300 * MiB) // PAGE


def test_ranks_with_different_pages_are_compared_in_blocks():
    # Rank 1 has more bytes to spare but a page twice as large: fewer whole blocks.
    ranks = [obs(0, 4 * GiB, MARGIN + 100 * MiB), obs(1, 6 * GiB, MARGIN, page=4 * MiB)]
    c = qualified_kv(ranks, MARGIN, block_tokens=16)
    assert c.bounding_rank == 1
    assert c.blocks == 6 * GiB // (4 * MiB)
    assert c.kv_bytes == c.blocks * 4 * MiB


def test_dcp_multiplies_logical_tokens_not_blocks():
    one = qualified_kv([obs(0, 1 * GiB, MARGIN)], MARGIN, block_tokens=64, dcp=1)
    four = qualified_kv([obs(0, 1 * GiB, MARGIN)], MARGIN, block_tokens=64, dcp=4)
    assert one.blocks == four.blocks == 1 * GiB // PAGE
    assert four.tokens == 4 * one.tokens == four.blocks * 64 * 4


def test_partial_blocks_round_down():
    c = qualified_kv([obs(0, 10 * PAGE, MARGIN + PAGE - 1)], MARGIN, block_tokens=16)
    assert c.blocks == 10
    c = qualified_kv([obs(0, 10 * PAGE, MARGIN + PAGE)], MARGIN, block_tokens=16)
    assert c.blocks == 11


def test_a_breached_margin_shrinks_the_kv_cache():
    c = qualified_kv([obs(0, 10 * GiB, MARGIN - 256 * MiB)], MARGIN, block_tokens=64)
    assert c.headroom == {0: -256 * MiB}
    assert c.kv_bytes == 10 * GiB - 256 * MiB
    assert c.blocks < 10 * GiB // PAGE


def test_no_room_for_one_block_is_an_error_naming_the_rank():
    ranks = [obs(0, 1 * GiB, MARGIN), obs(3, 1 * GiB, MARGIN - 1 * GiB - 1)]
    with pytest.raises(NoKvLeft, match="rank 3"):
        qualified_kv(ranks, MARGIN, block_tokens=64)


@pytest.mark.parametrize(
    "ranks, block, dcp",
    [([], 64, 1), ([obs(0, GiB, MARGIN, page=0)], 64, 1), ([obs(0, GiB, MARGIN)], 0, 1)],
)
def test_nonsense_inputs_are_refused(ranks, block, dcp):
    with pytest.raises(ValueError):
        qualified_kv(ranks, MARGIN, block_tokens=block, dcp=dcp)


def test_what_the_worker_held_and_the_workload_never_drew_counts_as_room():
    """The H100's MoE row held 1.65 GiB for serving's reserves and drew 0.24 GiB of it: NVML
    read the margin and the headroom only, and the unused 1.41 GiB is room like free memory."""
    held = RankObservation(0, 10 * GiB, MARGIN + 64 * MiB, PAGE, unused_hold=1410 * MiB)
    c = qualified_kv([held], MARGIN, block_tokens=64)
    assert c.kv_bytes == 10 * GiB + 64 * MiB + 1410 * MiB
    assert c.headroom == {0: 64 * MiB + 1410 * MiB}


def test_a_record_counts_the_hold_serving_never_drew_and_nothing_once_it_went_back():
    from launcher.contract.record import Activation, RankRecord

    rec = RankRecord(
        fingerprint="fp", rank=0, when="2026-12-06", held_for_serving=1694 * MiB,
        allocated_after_warmup=78_000 * MiB, serving_peak_allocated=78_267 * MiB,
        activation=Activation(profile_peak=538 * MiB, warmup_cached=24 * MiB),
    )  # fmt: skip
    assert rec.unused_hold() == (1694 - (267 - 24)) * MiB
    assert rec.model_copy(update={"hold_released": True}).unused_hold() == 0
    assert rec.model_copy(update={"serving_peak_allocated": None}).unused_hold() == 0
    over = rec.model_copy(update={"serving_peak_allocated": 80_000 * MiB})
    assert over.unused_hold() == 0  # drew past the hold: nothing of it unused
