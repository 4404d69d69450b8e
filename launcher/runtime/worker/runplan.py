"""The plan as a worker reads it: the file the launcher wrote, never the launcher's memory."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from launcher.contract.base import ContractError
from launcher.contract.facts import ModelFacts
from launcher.contract.names import ComponentName
from launcher.contract.plan import KvRecord, RankPlan
from launcher.contract.runfile import (
    FINGERPRINT_ENV,
    PLAN_ENV,
    REQUIRE_PLAN_ENV,
    RUN_DIR_ENV,
    RunFile,
    read_run_file,
)
from launcher.deployment import Deployment
from launcher.profile.schema import BYTES_CONTEXT, Profile
from launcher.switches import switch

NO_PLAN = (
    f"b12x-launch: no plan in the environment ({PLAN_ENV} unset): this worker sizes the KV "
    "cache as plain vLLM does (--gpu-memory-utilization), with no prewarm, JIT headroom or "
    "safety margin; start it with `b12x-launch PROFILE`, or run the line "
    "`b12x-launch PROFILE --print-command` prints"
)
"""What a planned worker says when it runs without a plan and none is required."""


class PlanMissing(RuntimeError):
    """The worker cannot read its plan: none where the launch required one
    (``BLAUNCH_REQUIRE_PLAN=1``), or a file that is broken or another version's."""


@dataclass(frozen=True)
class RunPlan:
    file: RunFile
    profile: Profile
    run_dir: Path | None
    fingerprint: str
    written_at: float = 0.0
    """When the launch wrote the plan file (its mtime; 0 when unknown): what a boot's caches
    hold that is newer came from this boot."""

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> RunPlan | None:
        env = os.environ if env is None else env
        path = env.get(PLAN_ENV)
        required = switch(REQUIRE_PLAN_ENV, env=env)
        if not path:
            if required:
                raise PlanMissing(
                    f"b12x-launch: {REQUIRE_PLAN_ENV}=1 but {PLAN_ENV} is not set, so this "
                    "worker has no plan; refusing to size the KV cache as plain vLLM would. "
                    "Run the whole line `b12x-launch PROFILE --print-command` prints (its env "
                    f"part included), or unset {REQUIRE_PLAN_ENV} to let vLLM size memory itself"
                )
            return None
        try:
            file = read_run_file(path)
            profile = Profile.model_validate(file.profile_data, context={BYTES_CONTEXT: True})
        except (ContractError, ValueError) as exc:
            # Another launcher's file or a broken one is never sized around: the worker stops
            # (with the fix when the launch required the plan).
            if not required:
                raise PlanMissing(f"b12x-launch: {exc}") from None
            raise PlanMissing(
                f"b12x-launch: cannot read the plan {PLAN_ENV}={path} ({exc}); refusing to "
                "size the KV cache without it. Write it again with `b12x-launch PROFILE "
                "--print-command` (or start with `b12x-launch PROFILE`)"
            ) from None
        own = env.get(FINGERPRINT_ENV, "").strip()
        if own and own != file.fingerprint:
            # A run directory used again: the file now holds another launch's plan, and this
            # worker's argv (sized by its own plan) would run under that plan's budget.
            raise PlanMissing(
                f"b12x-launch: the plan {PLAN_ENV}={path} is plan {file.fingerprint or '?'}, "
                f"not this worker's {FINGERPRINT_ENV}={own}: the run directory was written "
                "again for another plan after this command was printed; refusing to size the "
                "KV cache by another plan. Print the command again (`b12x-launch PROFILE "
                "--print-command`), or give each plan its own --run-dir"
            )
        run_dir = Path(env[RUN_DIR_ENV]) if env.get(RUN_DIR_ENV) else None
        try:
            written_at = Path(path).stat().st_mtime
        except OSError:  # read a moment ago; gone since: nothing is known to be this boot's
            written_at = 0.0
        return cls(file, profile, run_dir, file.fingerprint, written_at)

    def rank(self, rank: int) -> RankPlan:
        return self.file.rank(rank)

    def component(self, rank: int, name: ComponentName) -> int:
        return self.rank(rank).bytes(name)

    def measured(self, rank: int, name: ComponentName) -> int | None:
        """The component's bytes when an earlier boot measured them (a calibrated figure)."""
        return self.rank(rank).measured(name)

    @property
    def safety_margin(self) -> int:
        """The bytes the worker keeps free past every reserve (``memory.safety_margin``)."""
        return self.profile.memory.safety_margin

    @property
    def cache_root(self) -> str:
        """Where this deployment's caches and records live (``runtime.cache_root``)."""
        return self.profile.runtime.cache_root

    @property
    def strict_jit(self) -> bool:
        """A compile in serving's window fails the step (``prewarm.strict_jit``)."""
        return self.profile.prewarm.strict_jit

    @property
    def canary(self) -> bool:
        """A canary boot compiles a new kernel in each late window (``prewarm.canary``)."""
        return self.profile.prewarm.canary

    @property
    def kv(self) -> KvRecord:
        return self.file.kv

    @property
    def driver(self) -> str | None:
        """The GPU driver the launcher read on the cards (None: unknown)."""
        return self.file.cards.driver

    @property
    def pinned(self) -> bool:
        return self.kv.pinned is not None

    @property
    def deployment(self) -> Deployment:
        """The deployment the launcher resolved, as it wrote it (nothing derived again)."""
        return Deployment.from_record(self.profile, self.file.deployment)

    @property
    def facts(self) -> ModelFacts:
        """The model facts the plan was made from (no checkpoint read in the worker)."""
        return self.file.model_facts
