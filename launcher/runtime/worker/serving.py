"""What serving takes past vLLM's warmup, read at each step's edges, for the next plan.

vLLM's warmup leaves some activations cached and some not (its V2 model runner keeps none),
and mixed batches can fragment torch's segments beyond the profile batch's: on the H200 a
DeepSeek-V2 row took 1.18 GiB past the warmup against a 1.05 GiB activation reserve, 0.05 GiB
into the safety margin. The worker holds the activation and transient reserves in torch's
cache from the warmup on (``hold``), reads free device memory before and after every serving
step (an allocation happens on the host's timeline, so no synchronize is needed) with torch's
allocated peak, keeps the least free and the peak in the record and, where serving took more
than the record's activation figure (``RankRecord.serving_dip``), raises that figure: the next
plan then keeps what serving took free, measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.contract.names import ComponentName as Name
from launcher.contract.record import RankRecord
from launcher.units import MiB, format_size

STEP = 16 * MiB
"""A new low is recorded when it is this much below the last (bounds the record's writes)."""


def serving_reserve(activation: int, took: int, late: int) -> int:
    """The activation figure the next plan reserves: the larger of the recorded one and what
    serving took past the warmup (``RankRecord.serving_dip``), less what late compiles kept
    (the census reserves that)."""
    return max(activation, took - late)


def dip_words(took: int, grown: int | None) -> str:
    """Serving's dip in words: torch's grown segments, the rest outside its allocator
    (modules, library workspaces, other processes)."""
    text = f"serving took {format_size(took)} past vLLM's warmup"
    if grown is None:
        return text
    return (
        f"{text}: torch's segments grew {format_size(grown)}, {format_size(took - grown)} "
        "outside torch's allocator"
    )


@dataclass
class ServingWatch:
    """The low-water of free device memory while serving, kept in ``record``."""

    record: RankRecord
    margin: int
    activation: int
    """The record's activation figure when serving began (after the warmup's netting)."""
    warned: bool = False
    stopped: bool = False
    hold_stream: int | None = None
    """The stream the reserves were held on (None: not held); serving's steps must run on it
    for its requests to draw on them."""
    """Set by the worker when a reading failed: the watch reads no more."""

    def seen(self, free: int, reserved: int | None = None, peak: int | None = None) -> bool:
        """Take one reading (free device memory, torch's reserved segments then, and torch's
        allocated peak since the hold); True when the record changed (the caller saves it)."""
        rec = self.record
        if rec.free_after_warmup is None:
            return False
        lower = rec.serving_low_free is None or free <= rec.serving_low_free - STEP
        higher = peak is not None and (
            rec.serving_peak_allocated is None or peak >= rec.serving_peak_allocated + STEP
        )
        if not (lower or higher):
            return False
        if lower:
            rec.serving_low_free = free
            rec.serving_low_reserved = reserved
        if higher:
            rec.serving_peak_allocated = peak
        took = (rec.serving_dip() or (0, None))[0]
        late = sum(e.cost_bytes or 0 for e in rec.late_compiles)
        need = serving_reserve(self.activation, took, late)
        if need > self.activation:
            rec.measured[Name.ACTIVATION_PEAK] = need
            rec.measured_why[Name.ACTIVATION_PEAK] = (
                f"serving took {format_size(took)} past vLLM's warmup"
                + (f", less {format_size(late)} late compiles kept" if late else "")
                + f"; the warmup's figure was {format_size(self.activation)}"
            )
        return True

    def off_stream(self, current: int) -> bool:
        """Whether a step runs on another stream than the hold's (once: the hold then goes
        back, since its blocks would serve nothing and serving's own would come on top).
        Checked on the first step only: ``hold_stream`` is cleared either way."""
        held, self.hold_stream = self.hold_stream, None
        if held is None or current == held or self.record.hold_released:
            return False
        self.record.hold_released = True
        return True

    def release_due(self) -> bool:
        """Whether the held reserves go back now (once): free memory fell below the margin
        while they were held, so what is not torch's (a library's workspace, another
        process) may need it more than torch's cache does."""
        rec = self.record
        low = rec.serving_low_free
        if rec.hold_released or not rec.held_for_serving or low is None or low >= self.margin:
            return False
        rec.hold_released = True
        return True

    def split(self) -> str:
        """What serving took past the warmup at its low, split (``dip_words``); "" unread."""
        dip = self.record.serving_dip()
        return dip_words(*dip) if dip else ""

    def below_margin(self) -> bool:
        """Whether the low is under the safety margin and not yet said (said once)."""
        low = self.record.serving_low_free
        if low is None or low >= self.margin or self.warned:
            return False
        self.warned = True
        return True
