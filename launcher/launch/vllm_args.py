"""Profile + plan -> the ``vllm serve`` command line and environment."""

from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass

from launcher.contract.caches import CACHE_DIRS
from launcher.contract.names import (
    FINGERPRINT_ENV,
    PLAN_ENV,
    REQUIRE_PLAN_ENV,
    RUN_DIR_ENV,
)
from launcher.contract.names import ComponentName as Name
from launcher.deployment import Deployment
from launcher.launch.toolchain import pinned_env
from launcher.plan.planner import MemoryPlan
from launcher.profile.schema import Profile
from launcher.profile.vllm_flags import FlagValues, render, spans_nodes

# `python`, `python3`, `python3.11`: a profile naming Python runs the launcher's own interpreter.
PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?$")

# The module every node of a multi-node mp profile starts (see launcher/vllm_serve.py).
SERVE_MODULE = "launcher.vllm_serve"

# Slack on top of the context estimate when choosing --gpu-memory-utilization: vLLM
# refuses to start unless free memory at start-up covers utilization x total.
UTILIZATION_SLACK = 512 * 1024**2

COMPILE_KEY_ENV = {"VLLM_XLA_CACHE_PATH": "/tmp/vllm-xla-cache"}
"""Pinned so vLLM's ``torch.compile`` key does not follow the cache root. vLLM (0.26) hashes
every variable of its own into that key, this one included; its default lies under
``XDG_CACHE_HOME``, which ``CACHE_DIRS`` moves into the cache root. Left to the default, a
node restoring an artifact into another cache root gets another key and compiles vLLM's graphs
again (seen on the H200, 2026-12-03). Only XLA devices read the path."""


INDUCTOR_HOOK_ENV = {"TORCHINDUCTOR_RUN_JIT_POST_COMPILE_HOOK": "1"}
"""Makes Inductor call Triton's post-compile hook for the kernels it compiles itself (vLLM's
``torch.compile``d helpers, such as the V1 sampler's logprob counting): without it no hook
sees them compile after sizing."""


@dataclass(frozen=True)
class VllmCommand:
    argv: list[str]
    env: dict[str, str]
    """Only what the launcher sets; the process also inherits the caller's environment."""


def gpu_memory_utilization(plan: MemoryPlan) -> float:
    """The highest utilization vLLM's start-up check can meet on every rank.

    vLLM compares ``utilization x total`` with the free memory it sees once its context
    and NCCL exist: the card's free memory at launch (total minus ``other_processes``, which
    a launch reads per card) minus the planned ``cuda_context``, less a slack. The planned
    worker sizes the KV cache itself, so a low figure costs nothing.
    """
    worst = 1.0
    for r in plan.ranks:
        held = sum(
            c.bytes for c in r.components if c.name in (Name.OTHER_PROCESSES, Name.CUDA_CONTEXT)
        )
        worst = min(worst, (r.total_bytes - held - UTILIZATION_SLACK) / r.total_bytes)
    return max(0.001, math.floor(worst * 1000) / 1000)


def vllm_kv_bytes(profile: Profile, plan: MemoryPlan) -> int | None:
    """What ``--kv-cache-memory-bytes`` carries, if anything.

    CPU, pinned or not: the KV plus JIT headroom and safety margin, which the planned
    worker subtracts (so a run without it shows a different KV size). GPU and pinned:
    exactly the KV bytes. GPU and not pinned: nothing; vLLM measures, the worker subtracts.
    """
    rank = min(plan.ranks, key=lambda r: r.kv_blocks)
    if profile.hardware.gpu == "cpu":
        reserve = sum(
            c.bytes for c in rank.components if c.name in (Name.JIT_HEADROOM, Name.SAFETY_MARGIN)
        )
        return rank.kv_bytes + reserve
    if plan.kv.pinned:
        return rank.kv_bytes
    return None


def cache_env(profile: Profile) -> dict[str, str]:
    root = os.path.expanduser(profile.runtime.cache_root)
    return {var: os.path.join(root, sub) for var, sub in CACHE_DIRS.items()}


def interpreter(command: list[str]) -> list[str]:
    """``command`` with a bare Python name replaced by the interpreter running the launcher.

    The launcher and vLLM are installed together, so this interpreter has vLLM; the name on
    PATH may not exist (images ship ``python3`` only) or may be another Python.
    """
    if command and PYTHON_NAME.match(command[0]):
        return [sys.executable, *command[1:]]
    return list(command)


def entry_command(profile: Profile) -> list[str]:
    """What starts vLLM, before the model path.

    A multi-node mp profile runs vLLM's own ``serve`` through ``launcher.vllm_serve`` on
    every node, whatever ``vllm.command`` says: the API server module ignores
    ``--headless`` and the ``vllm`` script fails on builds not named ``vllm``.
    """
    if spans_nodes(profile):
        return [sys.executable, "-m", SERVE_MODULE]
    return interpreter(profile.vllm.command)


def build_command(
    profile: Profile,
    plan: MemoryPlan,
    *,
    plan_file: str = "",
    run_dir: str = "",
    fingerprint: str = "",
    deployment: Deployment,
) -> VllmCommand:
    p = profile
    d = deployment  # resolved by the caller that made the deployment
    values = FlagValues(
        profile=p,
        block_size=d.block_size,
        capture_sizes=d.capture_sizes,
        gpu_memory_utilization=gpu_memory_utilization(plan),
        kv_cache_bytes=vllm_kv_bytes(p, plan),
    )
    argv = [*entry_command(p), p.model.path, *render(values)]
    argv += list(p.vllm.extra_args)
    # the ptxas pin is this machine's (torch's files): the command is the one run here
    env = {**cache_env(p), **COMPILE_KEY_ENV, **pinned_env(p.env, os.environ), **p.env}
    for key, value in (
        (PLAN_ENV, plan_file),
        (RUN_DIR_ENV, run_dir),
        (FINGERPRINT_ENV, fingerprint),
    ):
        if value:
            env[key] = value
    if plan_file:
        env[REQUIRE_PLAN_ENV] = "1"
        env.update(INDUCTOR_HOOK_ENV)  # the planned worker's watchdog sees Inductor's compiles
    return VllmCommand(argv, env)
