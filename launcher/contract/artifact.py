"""A deployment's cache artifact as the run file records it (``--cache-from``).

The artifact room (``launcher.artifact``) bakes, checks and restores artifacts; it writes an
``ArtifactRecord`` into the run file, and the worker (``warm``) and ``report`` read it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, computed_field, field_validator, model_validator

from launcher.contract.base import Frozen
from launcher.contract.caches import CachePath

_FINGERPRINT = re.compile(r"^[0-9a-f]{12}$")


class ArtifactKeys(Frozen):
    """Where an artifact may be restored: each must equal the node's own."""

    fingerprint: str
    """The plan's fingerprint (``b12x-launch PROFILE --dry-run`` prints it): the deployment."""
    gpu_kind: str
    """The cards' kind as the GPU catalog names it (``cpu`` for vLLM's CPU backend)."""
    compute_capability: str | None = None
    """The cards' compute capability (NVML's, as ``nvidia-smi --query-gpu=compute_cap`` shows
    it), e.g. ``9.0``; None on CPU."""
    cuda_driver: str | None = None
    """The highest CUDA version the driver supports (NVML's, ``nvidia-smi``'s ``CUDA
    Version``); None on CPU."""
    build_id: str
    """The image's build id (``launcher.buildid``): the versions below, Python, the machine
    and the image's cache epoch."""
    versions: dict[str, str | None] = Field(default_factory=dict)
    """The keyed distributions' versions behind the build id (vLLM, torch, Triton, b12x,
    CUTLASS DSL, FlashInfer, b12x-launch), to name the one that differs."""

    @field_validator("fingerprint")
    @classmethod
    def _fingerprint(cls, value: str) -> str:
        if not _FINGERPRINT.match(value):
            raise ValueError(f"not a plan fingerprint (12 hex digits): {value!r}")
        return value


class CacheSummary(Frozen):
    """Files and bytes of one cache."""

    files: int = Field(ge=0)
    """Files it holds."""
    bytes: int = Field(ge=0)
    """Their bytes."""


class ArtifactRecord(Frozen):
    """What the launcher did with a cache artifact before vLLM started (``--cache-from``,
    ``BLAUNCH_CACHE_FROM``): written into the run file for the workers and ``report RUN_DIR``.
    The manifest it came from is ``launcher.artifact.manifest``."""

    state: Literal["restored", "present", "ignored"]
    """``restored`` (its files were moved into the caches now), ``present`` (restored by an
    earlier start into this cache root; every file still there) or ``ignored`` (it did not
    fit this node and ``--force`` booted without it; ``note`` says which key differed)."""
    artifact_id: str
    """16 hex digits of its manifest's sha256 (empty: its manifest could not be read)."""
    source: str
    """Where it was read from (a directory or a tar)."""
    fingerprint: str
    """The plan fingerprint it was baked for (its key; equal to the run's unless ignored)."""
    keys: ArtifactKeys | None = None
    """All its keys: fingerprint, gpu_kind, compute_capability, cuda_driver, build_id and
    the versions behind the build id (None: its manifest could not be read)."""
    caches: dict[str, CacheSummary] = Field(default_factory=dict)
    """Files and bytes per cache it held (``triton``, ``inductor``, ``vllm-compile``, ...)."""
    file_count: int = Field(0, ge=0)
    """Files it held."""
    total_bytes: int = Field(0, ge=0)
    """Their bytes."""
    calibration_ranks: tuple[int, ...] = ()
    """Ranks whose measurement record (measured figures and census) it held; restored into
    ``<cache_root>/calibration/<fingerprint>/rank<N>.json``."""
    qualified: bool = False
    """Whether it held the qualified KV size (``qualified.json``)."""
    census_entries: int = Field(0, ge=0)
    """Late compiles its records' census held."""
    files_restored: int = Field(0, ge=0)
    """Files written into the caches by this restore."""
    files_present: int = Field(0, ge=0)
    """Files the caches already held with the same bytes."""
    files_kept: int = Field(0, ge=0)
    """Files the caches already held with other bytes: the node's own, kept."""
    covers: bool = False
    """Whether it covers this boot: restored or present, baked for this run's fingerprint,
    and holding a measurement record of every rank of this node."""
    seconds: float = Field(0.0, ge=0)
    """How long verifying and restoring took."""
    note: str = ""
    """Why it was ignored, or what else happened to it."""

    @model_validator(mode="before")
    @classmethod
    def _warm_is_derived(cls, data: Any) -> Any:
        """``warm`` is written for the reader's eyes; it is derived again on reading."""
        if isinstance(data, dict) and "warm" in data:
            data = {k: v for k, v in data.items() if k != "warm"}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def warm(self) -> bool:
        """Whether the runtime may take this boot as a warm one: every compiled object and
        record of the baked boot is in the caches and the calibration store (see
        docs/operations.md, "A fresh node boots warm")."""
        return self.state in ("restored", "present") and self.covers


MARKERS = ".blaunch-artifacts"
"""Under the cache root: one marker per artifact restored there (``<artifact id>.json``)."""
JOURNAL = ".blaunch-restore.journal"
"""Under the cache root: the journal of a restore in progress."""


def marker_path(cache_root: Path, artifact_id: str) -> Path:
    """Where the restore of ``artifact_id`` into ``cache_root`` leaves its marker (written
    when the restore ends)."""
    return cache_root / MARKERS / f"{artifact_id}.json"


class Marker(Frozen):
    """What a restore leaves in ``<cache_root>/.blaunch-artifacts/<id>.json``."""

    profile: str = "?"
    """The profile's name the artifact was baked for."""
    record: ArtifactRecord
    """What the restore did."""


class JournalEntry(Frozen):
    """A file a restore is about to place: its path under the cache root and its sha256."""

    path: CachePath
    """Below the cache root, as the artifact's manifest lists it: a journal naming a path
    outside the caches (absolute, with ``..``) is not one. The reader still resolves each
    path without a link and refuses one outside, since the journal lies on a shared volume."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The bytes placed there: recovery removes the file only if it still has them."""


class RestoreJournal(Frozen):
    """``<cache_root>/.blaunch-restore.journal``: what a restore in progress places, so that
    the next launch takes back the files of one that was killed. It lies on a shared volume:
    the reader bounds it, and each path is resolved below the cache root without a link."""

    artifact_id: str = Field(pattern=r"^[0-9a-f]{16}$")
    """The artifact being restored (its marker's name: 16 hex digits, nothing else)."""
    files: list[JournalEntry]
    """The files about to be placed (those the cache already had are not listed)."""
