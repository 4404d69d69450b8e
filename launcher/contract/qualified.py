"""The qualified KV size (``qualified.json``, version 2): what ``b12x-launch qualify`` proved.

Qualify writes it into the run directory and the calibration store; the next plan of the same
deployment pins its KV cache to ``kv.blocks`` (source ``qualified``). Version 1 (the package
versions beside the cards' kind in ``environment``) reads into this type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, Strict

from launcher import atomic
from launcher.contract.base import Bytes, Contract, ContractError, Count, Frozen, validate
from launcher.contract.record import Environment

SCHEMA = "b12x-launch/qualified/2"
SCHEMA_V1 = "b12x-launch/qualified/1"
NAME = "qualified.json"
RECORD_MAX = 1 << 20
"""The largest qualified record read (real ones are a few KiB)."""
BLOCKS_MAX = 1 << 40
"""More KV blocks than any card holds; the plan checks the record against its own card too."""


class QualifiedKv(Frozen):
    """The KV size that left exactly the safety margin at the worst moment."""

    blocks: Annotated[int, Strict(), Field(gt=0, le=BLOCKS_MAX)]
    """KV blocks per rank: what the next plan pins."""
    tokens: Count = 0
    """Logical tokens those blocks hold."""
    bytes: Bytes = 0
    """Bytes per rank."""
    page_bytes: Bytes = 0
    """One block's bytes on one rank."""
    block_tokens: Count = 0
    """vLLM's block, in tokens."""
    dcp: Count = 1
    """Decode context parallelism."""
    bounding_rank: Count = 0
    """The rank whose low-water mark bounded it."""


class PlannedKv(Frozen):
    """What the plan gave before qualify."""

    blocks: int
    """KV blocks per rank the plan gave."""
    tokens: int
    """Logical tokens the plan gave."""


class RankObserved(Frozen):
    """One rank under the workload."""

    rank: Count
    """The rank."""
    kv_bytes: Bytes
    """The KV cache it had."""
    low_water_free: int | None = None
    """The least free memory NVML saw (None: no physical sampling)."""
    headroom: int | None = None
    """Low water less the safety margin (None: no physical sampling)."""
    new_kv_bytes: int
    """The KV bytes that would have left exactly the safety margin."""


class LateSeen(Frozen):
    """A compile after sizing a boot's worker recorded, for the qualified record."""

    rank: Count
    """The rank that compiled."""
    what: str
    """The compile, in words (its census entry described)."""


class WorkloadDone(Frozen):
    """What the workload's requests did."""

    completed: Count = 0
    """Requests that completed."""
    failed: Count = 0
    """Requests that failed."""
    errors: list[str] = Field(default_factory=list)
    """The first errors, in words."""
    output_tokens: Count = 0
    """Tokens generated."""
    seconds: float = 0.0
    """How long the workload ran."""
    timed_out: bool = False
    """Whether it ran out of time."""


class BootSummary(Contract):
    """One boot under the workload."""

    run_dir: str
    """The boot's run directory."""
    kv_blocks: dict[int, int] = Field(default_factory=dict)
    """The KV blocks each rank's worker got."""
    workload: WorkloadDone = Field(default_factory=WorkloadDone)
    """What the workload's requests did."""
    low_water_free: dict[int, int] = Field(default_factory=dict)
    """The least free memory NVML saw per rank while the workload ran."""
    sampled: bool = False
    """Whether free memory was sampled physically (NVML)."""
    samples: Count = 0
    """Free-memory samples taken."""
    late_compiles: list[LateSeen] = Field(default_factory=list)
    """Compiles after sizing the workers recorded."""
    exit_code: int | None = None
    """The server's exit code (None: it did not stop)."""
    seconds: dict[str, float] = Field(default_factory=dict)
    """Boot, workload and total seconds."""


class Verified(BootSummary):
    """The verify boot: through the next plan, at the qualified size."""

    passed: bool
    """Whether the workload ran at the qualified size."""
    min_headroom: int | None = None
    """The least free memory above the safety margin (None: not sampled)."""


class WorkloadSpec(Frozen):
    """The worst case the boot served (``launcher.qualify.workload``)."""

    requests: Count
    """Requests sent."""
    concurrency: Count
    """Requests in flight at once."""
    prompt_tokens: Count
    """Prompt tokens of each request."""
    fill_prompt_tokens: Count = 0
    """Prompt tokens of the requests that fill the cache."""
    output_tokens: Count
    """Tokens each request generates."""
    max_seconds: float
    """How long the workload may run."""
    chunk_tokens: Count = 0
    """The prefill chunk (``max_num_batched_tokens``)."""
    tokens_per_dcp_rank: Count = 0
    """Tokens each DCP rank holds at the worst moment."""


class QualifiedRecord(Contract):
    """What qualify found for one deployment."""

    schema_id: Literal["b12x-launch/qualified/2"] = Field(SCHEMA, alias="schema")
    """This layout's name and version (``schema``)."""
    fingerprint: str
    """The plan it was qualified for."""
    when: str = "?"
    """ISO time of the qualification."""
    profile: str = ""
    """The profile's name."""
    environment: Environment = Field(default_factory=Environment)
    """What it was qualified under (the same staleness rule as a rank record's)."""
    kv: QualifiedKv
    """The qualified KV size."""
    planned: PlannedKv | None = None
    """What the plan gave before qualify."""
    safety_margin: Bytes = 0
    """The profile's safety margin the size leaves free."""
    basis: str = ""
    """What the size rests on (NVML's low-water mark, or the size that survived)."""
    ranks: list[RankObserved] = Field(default_factory=list)
    """Each rank under the workload."""
    workload: WorkloadSpec | None = None
    """The worst case the boot served."""
    late_compiles: list[LateSeen] = Field(default_factory=list)
    """Compiles after sizing in the qualifying boot."""
    boots: Count = 1
    """Boots it took (2 with ``--verify``)."""
    qualify_boot: BootSummary | None = None
    """The qualifying boot."""
    seconds: float = 0.0
    """How long qualify took."""
    verify: Verified | None = None
    """The verify boot (None: ``--verify`` was not asked for)."""

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=False)


def read(data: Any, path: str | Path) -> QualifiedRecord:
    """A qualified record's JSON (either version), typed; ``ContractError`` naming the file
    and what is wrong."""
    if not isinstance(data, dict) or data.get("schema") not in (SCHEMA, SCHEMA_V1):
        raise ContractError(path, "not a b12x-launch qualified record")
    if data["schema"] == SCHEMA:
        return validate(QualifiedRecord, data, path, "qualified record")
    return upgrade(data, path)


def upgrade(data: dict[str, Any], path: str | Path) -> QualifiedRecord:
    """A version 1 record (or a hand-made one in that layout) as version 2."""
    env = data.get("environment", {})
    if not isinstance(env, dict) or not all(
        isinstance(v, str | int | float | type(None)) for v in env.values()
    ):
        raise ContractError(path, "malformed environment (a mapping of names to versions)")
    own = ("gpu_kind", "host", "gpu", "cuda", "driver")
    upgraded = {
        **{k: v for k, v in data.items() if k != "schema"},
        "schema": SCHEMA,
        "environment": {
            **{k: _text(env.get(k)) for k in own},
            "packages": {k: _text(v) for k, v in env.items() if k not in own},
        },
    }
    return validate(QualifiedRecord, upgraded, path, "qualified record")


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def write(record: QualifiedRecord, paths: list[Path]) -> list[Path]:
    """Write the record whole to each of ``paths``, atomically."""
    data = record.to_json()
    return [atomic.write_json(p, data) for p in paths]
