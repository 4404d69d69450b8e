"""From the worst moment a boot survived to the KV size that leaves exactly the margin.

Pure arithmetic. On each rank the lowest physical free memory seen while the workload
ran is what that KV size left at the worst moment; every byte above the safety margin
could have been KV, every byte below it must come out of the KV:

    new_kv(rank) = kv_bytes(rank) + (low_water_free(rank) + unused_hold(rank) - safety_margin)

The worker holds serving's activation and transient reserves in torch's cache, so a free
reading does not show what of them the workload never drew (``unused_hold``, from each rank's
record): that was free memory in effect, and counts as room like the rest.

The engine gives every rank the same block count, so the answer is the smallest
rank's whole blocks. Under decode context parallelism a block on one rank holds
``block x DCP`` logical tokens.
"""

from __future__ import annotations

from dataclasses import dataclass


class NoKvLeft(ValueError):
    """The worst moment left less than the safety margin even with no KV cache."""


@dataclass(frozen=True)
class RankObservation:
    rank: int
    kv_bytes: int
    """KV bytes the rank's worker allocated (its blocks x page bytes)."""
    low_water_free: int
    """Lowest physical free memory sampled while the KV cache existed."""
    page_bytes: int
    """Bytes of one KV block on this rank (every layer)."""
    unused_hold: int = 0
    """What the worker held for serving's reserves that the workload never drew
    (``RankRecord.unused_hold``): free in effect, though no free reading shows it."""

    def new_kv_bytes(self, safety_margin: int) -> int:
        return self.kv_bytes + self.low_water_free + self.unused_hold - safety_margin

    def blocks(self, safety_margin: int) -> int:
        return max(0, self.new_kv_bytes(safety_margin)) // self.page_bytes


@dataclass(frozen=True)
class Ceiling:
    blocks: int
    """Blocks per rank the qualified KV cache holds."""
    tokens: int
    """Logical tokens: blocks x block tokens x DCP."""
    kv_bytes: int
    """KV bytes on the bounding rank (its blocks x page bytes)."""
    bounding_rank: int
    headroom: dict[int, int]
    """Per rank: low-water free minus the safety margin (negative: the margin was breached)."""


def qualified_kv(
    observations: list[RankObservation], safety_margin: int, block_tokens: int, dcp: int = 1
) -> Ceiling:
    """The largest whole-block KV size that leaves ``safety_margin`` free on every rank.

    Raises:
        ValueError: no observations, or a page, block or DCP size that is not positive.
        NoKvLeft: some rank has no room for a single block.
    """
    if not observations:
        raise ValueError("no rank was observed")
    if block_tokens <= 0 or dcp <= 0 or any(o.page_bytes <= 0 for o in observations):
        raise ValueError("page bytes, block tokens and DCP must be positive")
    bounding = min(observations, key=lambda o: (o.blocks(safety_margin), o.rank))
    blocks = bounding.blocks(safety_margin)
    headroom = {o.rank: o.low_water_free + o.unused_hold - safety_margin for o in observations}
    if blocks == 0:
        raise NoKvLeft(
            f"rank {bounding.rank}: the worst moment left {bounding.low_water_free:,} bytes free "
            f"with a {bounding.kv_bytes:,}-byte KV cache; the safety margin {safety_margin:,} "
            "leaves no room for one block"
        )
    return Ceiling(
        blocks=blocks,
        tokens=blocks * block_tokens * dcp,
        kv_bytes=blocks * bounding.page_bytes,
        bounding_rank=bounding.rank,
        headroom=headroom,
    )
