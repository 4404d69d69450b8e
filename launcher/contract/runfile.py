"""The run file (``plan.json``, version 3): what the launcher hands every worker of a run.

The launcher writes it atomically into the run directory and points the workers at it
through the environment (``PLAN_ENV``); ``report RUN_DIR`` and ``qualify`` read it too. It
is the plan (``PlanRecord``: the keys ``--json`` prints, the redacted vLLM command among
them) and what the worker would otherwise derive or query again: the merged profile, the
resolved deployment, the model facts, the cards the launcher read, and the cache artifact it
restored. Version 2 files (``launcher.contract.runfile_v2``) read into this type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from launcher import atomic
from launcher.contract import runfile_v2
from launcher.contract.artifact import ArtifactRecord
from launcher.contract.base import ContractError, Frozen, read_json, validate
from launcher.contract.facts import ModelFacts
from launcher.contract.names import (  # noqa: F401  (re-exported: the run file's variables)
    ENV_PREFIX,
    FINGERPRINT_ENV,
    PLAN_ENV,
    REQUIRE_PLAN_ENV,
    RUN_DIR_ENV,
)
from launcher.contract.plan import PlanRecord

RUN_FILE_VERSION = 3
"""plan.json's layout (3: typed throughout, the cards grouped, jit_headroom with its parts,
the KV cache's source an enum; 2: the deployment and the model facts added)."""
PLAN_FILE = "plan.json"
COMMAND_FILE = "command.txt"


class DeploymentRecord(Frozen):
    """The profile's derived values as the launcher resolved them (``launcher.deployment``):
    the worker reads them instead of deriving them again."""

    runtime: str
    """The vLLM line (``launcher.vllm.lines.VLLM_LINES``)."""
    backend_family: Literal["sparse-mla-b12x", "sparse-mla-flashmla", "dense"]
    """Which attention the backend runs."""
    block_size: int = Field(ge=1)
    """vLLM's KV block, in tokens."""
    capture_sizes: tuple[int, ...] = ()
    """CUDA-graph capture sizes; empty without graphs."""
    decode_rows: tuple[int, ...] = ()
    """The token counts a decode step runs at."""
    prewarm: tuple[str, ...] = ()
    """The prewarm providers a worker runs, in order."""
    why: dict[str, str] = Field(default_factory=dict)
    """How each value was decided."""


class Cards(Frozen):
    """What the launcher read on the cards before it started vLLM (absent: a dry run's
    ``--print-command``, or vLLM's CPU backend)."""

    driver: str | None = None
    """The GPU driver; the workers record it without asking the driver again."""
    gpu_kind: str | None = None
    """The cards' kind as the catalog names it (under ``--force`` not the profile's: the
    records then stay out of the profile's calibration store)."""


class RunFile(PlanRecord):
    """``plan.json``: the plan with everything a worker reads beside it."""

    run_file: Literal[3] = RUN_FILE_VERSION
    """This layout's version."""
    profile_data: dict[str, Any]
    """The merged profile (``launcher.profile.schema.Profile``'s JSON, sizes in bytes, no
    ``env``, secrets in extra arguments masked); the worker validates it with the schema."""
    profile_file: str = ""
    """The profile's file, as it was named."""
    deployment: DeploymentRecord
    """The profile's derived values, as the launcher resolved them."""
    model_facts: ModelFacts
    """The model facts the plan was made from."""
    cards: Cards = Field(default_factory=Cards)
    """What the launcher read on the cards."""
    artifact: ArtifactRecord | None = None
    """The cache artifact restored before vLLM started (``--cache-from``), or None: no
    artifact was given."""

    @property
    def plan(self) -> PlanRecord:
        """The plan alone (what ``--json`` printed for it)."""
        fields = set(PlanRecord.model_fields)
        return PlanRecord.model_validate({k: v for k, v in self if k in fields})


def write_run_file(path: Path, run: RunFile) -> Path:
    """Write ``run`` atomically (a worker reads the old file or the new one, never half)."""
    return atomic.write_json(path, run.to_json())


def read_run_file(path: str | Path) -> RunFile:
    """The run file at ``path``, typed: version 3 as it is, version 2 through its reader.

    Raises:
        ContractError: naming the file, when it cannot be read, is not a b12x-launch run
            file, was written by another version, or is malformed (naming the key).
    """
    return run_file_of(read_json(Path(path), "run file"), path)


def run_file_of(data: dict[str, Any], path: str | Path) -> RunFile:
    """``data`` (a run file's JSON, read from ``path``) as the current version."""
    version = data.get("run_file")
    if version == RUN_FILE_VERSION:
        return validate(RunFile, data, path, "run file")
    if version == 2:
        return validate(RunFile, runfile_v2.upgrade(data, path), path, "run file")
    raise ContractError(
        path,
        f"run file version {version!r}, this b12x-launch reads {RUN_FILE_VERSION} (and 2): "
        "it was written by another b12x-launch; write it again with this one",
    )


def plan_of(data: Any, path: str | Path) -> tuple[PlanRecord, ArtifactRecord | None]:
    """A run's plan and artifact for ``report``, from ``data`` read at ``path``: a run file
    of any version this launcher reads, or the plan alone as ``--json`` printed it (no
    ``run_file`` key: this version's keys, or version 2's).

    Raises:
        ContractError: ``reason`` says what the plan lacks or what is malformed.
    """
    if isinstance(data, dict) and "run_file" in data:
        run = run_file_of(data, path)
        return run.plan, run.artifact
    return validate(PlanRecord, runfile_v2.plan(data, path), path, "plan"), None
