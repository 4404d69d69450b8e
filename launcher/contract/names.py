"""The names every process agrees on: the plan's components and where a number came from.

Each is defined here once; the planner, the worker, the records and the reports name them
by these enums (a ``StrEnum`` member is its own string in JSON and in comparisons).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

# The launcher's own variables (the run file's, ``launcher.contract.runfile``, here so the
# dry run's argv needs no run-file model). Never B12X_, CUTE_ or CUTLASS_: b12x puts those
# into its compile-cache key, and one extra variable would recompile every kernel.
ENV_PREFIX = "BLAUNCH_"
PLAN_ENV = ENV_PREFIX + "PLAN"
RUN_DIR_ENV = ENV_PREFIX + "RUN_DIR"
FINGERPRINT_ENV = ENV_PREFIX + "FINGERPRINT"
REQUIRE_PLAN_ENV = ENV_PREFIX + "REQUIRE_PLAN"
"""Set to 1 with a plan: a planned worker that cannot read its plan then refuses to start
instead of sizing the KV cache as plain vLLM does (a command run by hand without the plan)."""


class ComponentName(StrEnum):
    """One slice of a GPU's memory in the plan, bottom to top."""

    OTHER_PROCESSES = "other_processes"
    CUDA_CONTEXT = "cuda_context"
    WEIGHTS = "weights"
    ACTIVATION_PEAK = "activation_peak"
    WORKSPACES = "workspaces"
    CUDAGRAPH_POOL = "cudagraph_pool"
    TRANSIENTS = "transients"
    """What request features and settings allocate after sizing (``launcher.plan.transients``)."""
    JIT_HEADROOM = "jit_headroom"
    SAFETY_MARGIN = "safety_margin"
    KV_CACHE = "kv_cache"


MEASURABLE = (
    ComponentName.CUDA_CONTEXT,
    ComponentName.WEIGHTS,
    ComponentName.ACTIVATION_PEAK,
    ComponentName.WORKSPACES,
    ComponentName.CUDAGRAPH_POOL,
    ComponentName.JIT_HEADROOM,
)
"""Components a worker measures; a plan whose every one of these is measured is calibrated."""

ORDER = (
    ComponentName.OTHER_PROCESSES,
    *MEASURABLE[:-1],
    ComponentName.TRANSIENTS,
    ComponentName.JIT_HEADROOM,
    ComponentName.SAFETY_MARGIN,
)
"""The fixed components in the order the plan lists them; the KV cache is what is left."""


class HeadroomPart(StrEnum):
    """The parts a calibrated ``jit_headroom`` carries (``parts`` of its component): the
    planner adds them once, the worker reads them, nobody takes one back out of the sum."""

    PREWARM = "prewarm"
    """What an earlier boot's prewarm measured it must keep free (the figure the record's
    ``measured.jit_headroom`` holds)."""
    LATE_COMPILES = "late_compiles"
    """The measured cost of the late compiles the census cannot replay before sizing."""


class Source(StrEnum):
    """Where a number came from."""

    MEASURED = "measured"
    """An earlier boot's worker measured it (calibration), or the driver reports it now."""
    B12X = "b12x"
    """b12x's own plan functions sized it."""
    HEADERS = "headers"
    """The checkpoint's safetensors headers."""
    CATALOG = "catalog"
    """The shipped catalog (GPUs, architectures)."""
    CONFIG_JSON = "config.json"
    """The checkpoint's config.json."""
    ESTIMATE = "estimate"
    """A formula (labelled as such until a boot measures it)."""
    PROFILE = "profile"
    """The profile sets it."""
    QUALIFIED = "qualified"
    """``b12x-launch qualify`` proved it under the worst case."""


def calibrated(components: Iterable[tuple[str, int, Source]]) -> bool:
    """Whether every measurable component with bytes (name, bytes, source) is an earlier
    boot's measurement: the rule a calibrated rank meets, for the contract's ranks and the
    planner's alike (here, beside the names, so the dry run's table loads no record model)."""
    present = [source for name, size, source in components if name in MEASURABLE and size]
    return bool(present) and all(source is Source.MEASURED for source in present)
