"""The plan as a worker reads it: the file the launcher wrote, never the launcher's memory."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.deployment import Deployment
from launcher.launch.vllm_args import (
    FINGERPRINT_ENV,
    PLAN_ENV,
    REQUIRE_PLAN_ENV,
    RUN_DIR_ENV,
    RUN_FILE_VERSION,
)
from launcher.plan.model import ModelFacts
from launcher.profile.schema import BYTES_CONTEXT, Profile

NO_PLAN = (
    f"b12x-launch: no plan in the environment ({PLAN_ENV} unset): this worker sizes the KV "
    "cache as plain vLLM does (--gpu-memory-utilization), with no prewarm, JIT headroom or "
    "safety margin; start it with `b12x-launch PROFILE`, or run the line "
    "`b12x-launch PROFILE --print-command` prints"
)
"""What a planned worker says when it runs without a plan and none is required."""


class PlanMissing(RuntimeError):
    """The launch required a plan (``BLAUNCH_REQUIRE_PLAN=1``) that the worker cannot read."""


@dataclass(frozen=True)
class RunPlan:
    data: dict[str, Any]
    profile: Profile
    run_dir: Path | None
    fingerprint: str

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> RunPlan | None:
        env = os.environ if env is None else env
        path = env.get(PLAN_ENV)
        required = env.get(REQUIRE_PLAN_ENV, "").strip().lower() in ("1", "true", "yes", "on")
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
            data = json.loads(Path(path).read_text())
            profile = Profile.model_validate(data["profile_data"], context={BYTES_CONTEXT: True})
        except (OSError, ValueError, KeyError, TypeError) as exc:
            if not required:
                raise
            raise PlanMissing(
                f"b12x-launch: cannot read the plan {PLAN_ENV}={path} ({exc}); refusing to "
                "size the KV cache without it. Write it again with `b12x-launch PROFILE "
                "--print-command` (or start with `b12x-launch PROFILE`)"
            ) from None
        run_dir = Path(env[RUN_DIR_ENV]) if env.get(RUN_DIR_ENV) else None
        return cls(data, profile, run_dir, env.get(FINGERPRINT_ENV, data.get("fingerprint", "")))

    def rank(self, rank: int) -> dict[str, Any]:
        return self.data["ranks"][rank]

    def component(self, rank: int, name: str) -> int:
        comp = self.rank(rank)["components"].get(name)
        return int(comp["bytes"]) if comp else 0

    def measured(self, rank: int, name: str) -> int | None:
        """The component's bytes when an earlier boot measured them (a calibrated figure)."""
        comp = self.rank(rank)["components"].get(name) or {}
        return int(comp["bytes"]) if comp.get("source") == "measured" else None

    @property
    def kv(self) -> dict[str, Any]:
        return self.data["kv"]

    @property
    def pinned(self) -> bool:
        return bool(self.kv.get("pinned"))

    @property
    def deployment(self) -> Deployment:
        """The deployment the launcher resolved, as it wrote it (nothing derived again)."""
        return Deployment.from_record(self.profile, self._section("deployment"))

    @property
    def facts(self) -> ModelFacts:
        """The model facts the plan was made from (no checkpoint read in the worker)."""
        return ModelFacts.from_record(self._section("model_facts"))

    def _section(self, name: str) -> dict[str, Any]:
        if self.data.get("run_file") != RUN_FILE_VERSION or name not in self.data:
            raise PlanMissing(
                f"b12x-launch: the plan file lacks {name!r} (run file version "
                f"{self.data.get('run_file')}, this worker reads {RUN_FILE_VERSION}): it was "
                "written by another b12x-launch; start the server again with this one"
            )
        return self.data[name]
