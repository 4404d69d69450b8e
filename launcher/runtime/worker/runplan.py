"""The plan as a worker reads it: the file the launcher wrote, never the launcher's memory."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launcher.launch.vllm_args import FINGERPRINT_ENV, PLAN_ENV, RUN_DIR_ENV
from launcher.profile.schema import Profile


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
        if not path:
            return None
        data = json.loads(Path(path).read_text())
        profile = Profile.model_validate(data["profile_data"])
        run_dir = Path(env[RUN_DIR_ENV]) if env.get(RUN_DIR_ENV) else None
        return cls(data, profile, run_dir, env.get(FINGERPRINT_ENV, data.get("fingerprint", "")))

    def rank(self, rank: int) -> dict[str, Any]:
        return self.data["ranks"][rank]

    def component(self, rank: int, name: str) -> int:
        comp = self.rank(rank)["components"].get(name)
        return int(comp["bytes"]) if comp else 0

    @property
    def kv(self) -> dict[str, Any]:
        return self.data["kv"]

    @property
    def pinned(self) -> bool:
        return bool(self.kv.get("pinned"))
