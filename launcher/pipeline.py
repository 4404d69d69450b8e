"""The launcher read top to bottom: load -> plan -> render -> launch.

Each step is a named function; ``cli.py`` only parses and prints.
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.fingerprint import profile_fingerprint
from launcher.inputs import gather
from launcher.plan import MemoryPlan, plan
from launcher.profile import LoadedProfile, load_profile
from launcher.vllm_args import VllmCommand, build_command


@dataclass(frozen=True)
class Planned:
    loaded: LoadedProfile
    plan: MemoryPlan
    command: VllmCommand
    fingerprint: str
    b12x_sizing: bool = False
    calibrate: bool = True


def load(path: str, overrides: tuple[str, ...] = ()) -> LoadedProfile:
    return load_profile(path, overrides)


def check(path: str, overrides: tuple[str, ...] = ()) -> LoadedProfile:
    """Load and gather facts (catches unknown GPUs, architectures, bad checkpoints)."""
    loaded = load(path, overrides)
    gather(loaded)
    return loaded


def make_plan(
    loaded: LoadedProfile,
    *,
    b12x_sizing: bool = False,
    calibrate: bool = True,
    gpu_memory: tuple[int, str] | None = None,
    driver: str | None = None,
) -> Planned:
    fingerprint = profile_fingerprint(loaded.profile)
    measured = {}
    if calibrate:
        from launcher.calibration import load_measured

        measured = load_measured(loaded.profile, fingerprint, driver=driver)
    inputs = gather(loaded, b12x_sizing=b12x_sizing, measured=measured, gpu_memory=gpu_memory)
    memory_plan = plan(loaded.profile, inputs)
    command = build_command(loaded.profile, memory_plan, fingerprint=fingerprint)
    return Planned(loaded, memory_plan, command, fingerprint, b12x_sizing, calibrate)


def render(
    planned: Planned, *, as_json: bool, command_only: bool = False, color: bool = False
) -> str:
    from launcher import report

    if command_only:
        return report.command_line(planned.command) + "\n"
    if as_json:
        return report.to_json(planned.plan, planned.command, planned.fingerprint)
    return report.render_table(planned.plan, planned.command, planned.fingerprint, color=color)


def launch(planned: Planned, *, force: bool, run_dir: str | None) -> None:
    from launcher.launch import launch as start

    start(planned, force=force, run_dir=run_dir)
