"""One plan, every target: the same profile as a Kubernetes LeaderWorkerSet and as
per-node docker compose files.

Each target runs the same image and entry point (``docker/entrypoint.sh``) with the same
launcher arguments as a shell on the node would: the profile, its ``--set`` overrides and
the node's ``--node-rank``; the launcher on each node then plans and checks its own GPUs
and meets the other nodes before vLLM starts. Nothing here imports torch, vLLM or b12x.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from launcher import atomic
from launcher.errors import ProfileError

if TYPE_CHECKING:
    from launcher.profile import LoadedProfile

DEFAULT_IMAGE = "b12x-launch:latest"
CACHE_MOUNT = "/cache"
CACHE_HOST_PATH = "/var/cache/b12x-launch"
"""Where each machine keeps its JIT caches: a node's kernels are compiled for its GPUs."""


@dataclass(frozen=True)
class Target:
    """What every emitted file shares: how to run the launcher in the image."""

    loaded: LoadedProfile
    fingerprint: str
    image: str = DEFAULT_IMAGE
    profile_ref: str = ""
    """The profile as the container's entry point finds it (a path in the image or a name
    under ``/profiles``)."""
    overrides: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    @property
    def profile(self):
        return self.loaded.profile

    def launcher_args(self, node_rank: str, master_addr: str | None = None) -> list[str]:
        args = [self.profile_ref]
        for o in self.overrides:
            args += ["--set", o]
        if master_addr is not None:
            args += ["--set", f"runtime.master_addr={master_addr}"]
        if self.profile.hardware.nodes > 1:
            args += ["--node-rank", node_rank]
        return args


def plan_env(loaded: LoadedProfile) -> dict[str, str]:
    """The plan's own environment for a container: the profile's ``env`` plus the port the
    health check reads. Cache paths are not here: the entry point keys them by image build."""
    p = loaded.profile
    return {**p.env, "BLAUNCH_PORT": str(p.serving.port)}


def check_target(loaded: LoadedProfile) -> None:
    """Refuse what the emitted files cannot run, before anything is written."""
    p = loaded.profile
    if p.hardware.nodes > 1 and p.runtime.multinode != "mp":
        raise ProfileError(
            [
                loaded.issue(
                    "runtime.multinode",
                    "emit writes vLLM's multiprocess multi-node launch only (got ray); set "
                    "runtime.multinode: mp, or start the Ray cluster yourself",
                )
            ]
        )


def write_all(files: dict[str, str], out_dir: Path) -> list[Path]:
    """Write every file atomically (each whole or not at all) under ``out_dir``."""
    return [atomic.write_text(out_dir / name, text) for name, text in files.items()]
