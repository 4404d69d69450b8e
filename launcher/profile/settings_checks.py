"""Settings that would make what runs differ from what was planned, refused or warned
before anything starts.

The plan is only true of the command it prints: a flag in ``vllm.extra_args`` that repeats a
planned one wins (vLLM's parser keeps the last), a worker class that is not the planned worker
does not keep the budget, a prewarm provider that does not exist fails in the workers after
the weights load. Each check returns ``(key, message)`` pairs, the message ending with the
fix; ``rules.py`` registers them. Nothing here imports the launch or runtime stages: the
prewarm providers' names come from ``prewarm_providers``, in this room.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from launcher.profile import extra_args, prewarm_providers, retired_env
from launcher.profile.schema import Profile
from launcher.profile.vllm_flags import PLANNED_WORKERS
from launcher.units import GiB

DCP_COMM_BACKENDS = ("ag_rs", "a2a")
"""vLLM's ``--dcp-comm-backend`` choices: all-gather + reduce-scatter, or all-to-all."""


def command_names_a_program(p: Profile) -> Iterator[tuple[str, str]]:
    if not p.vllm.command or not str(p.vllm.command[0]).strip():
        yield (
            "vllm.command",
            "must name the program that starts vLLM (got an empty list); "
            "remove the key for the default [vllm, serve]",
        )


def block_size_vllm_takes(p: Profile) -> Iterator[tuple[str, str]]:
    block = p.serving.block_size
    if block is not None and (block < 8 or block & (block - 1)):
        yield (
            "serving.block_size",
            f"vLLM's KV blocks are a power of two of at least 8 tokens (got {block}); "
            "use 16, 64 (the MLA sparse backends) or 128 (CPU), or remove the key for the "
            "backend's default",
        )


def dcp_comm_backend_known(p: Profile) -> Iterator[tuple[str, str]]:
    backend = p.parallel.dcp_comm_backend
    if backend is not None and backend not in DCP_COMM_BACKENDS:
        yield (
            "parallel.dcp_comm_backend",
            f"unknown DCP communication backend {backend!r}; use "
            f"{' or '.join(DCP_COMM_BACKENDS)}, or remove the key for vLLM's default",
        )


def ports_distinct(p: Profile) -> Iterator[tuple[str, str]]:
    if p.hardware.nodes > 1 and p.serving.port == p.runtime.master_port:
        yield (
            "runtime.master_port",
            f"is serving.port ({p.serving.port}) as well: node 0 cannot listen for the API and "
            "the nodes' rendezvous on one port; set runtime.master_port to another port "
            "(default 29500)",
        )


_ADDRESS = re.compile(
    r"^(\[[0-9A-Fa-f:.]+\]|[0-9A-Fa-f:]+:[0-9A-Fa-f:.]*|[A-Za-z0-9]([A-Za-z0-9.-]{0,252}))$"
)


def master_addr_an_address(p: Profile) -> Iterator[tuple[str, str]]:
    """Every node passes ``runtime.master_addr`` on its command line and vLLM connects to it:
    a host name or an IP address, nothing a shell or a manifest would read otherwise."""
    addr = p.runtime.master_addr
    if addr is not None and not _ADDRESS.match(addr):
        yield (
            "runtime.master_addr",
            f"{addr[:60]!r} is not a host name or an IP address; set node 0's address "
            "(192.168.1.10, node0.example.net, fd00::10)",
        )


def prewarm_providers_known(p: Profile) -> Iterator[tuple[str, str]]:
    builtin = prewarm_providers.BUILTIN
    unknown = [
        (i, n) for i, n in enumerate(p.prewarm.providers) if ":" not in n and n not in builtin
    ]
    if not unknown:
        return
    known = tuple(prewarm_providers.available())  # the entry points, only for a name not built in
    import difflib  # only for a name that is wrong

    for i, name in unknown:
        if name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        yield (
            f"prewarm.providers.{i}",
            f"unknown prewarm provider {name!r} (the workers would fail on it after the "
            f"weights load); {hint}known: {', '.join(known)}, or a package.module:Class",
        )


def worker_is_planned(p: Profile) -> Iterator[tuple[str, str]]:
    """A warning: another worker class may not keep the planned budget."""
    cls = p.vllm.worker_cls
    if cls != "auto" and cls not in PLANNED_WORKERS:
        yield (
            "vllm.worker_cls",
            f"{cls} is not the planned worker: unless it subclasses "
            f"{PLANNED_WORKERS[0]}, vLLM sizes the KV cache itself and the printed plan is not "
            "enforced; remove the key (auto) to keep the budget",
        )


def decimal_memory(p: Profile) -> Iterator[tuple[str, str]]:
    """A warning: ``96GB`` is 10^9 bytes per GB, about 7% less than ``96GiB``."""
    for key, value in (
        ("hardware.memory", p.hardware.memory),
        ("hardware.reserved_by_others", p.hardware.reserved_by_others),
    ):
        if value and value % 10**9 == 0 and value % GiB:
            yield (
                key,
                f"is {value // 10**9} GB = {value / GiB:.2f} GiB (GB is 10^9 bytes, GiB 2^30, "
                f"and CUDA reports GiB); write {value // 10**9}GiB if that is what you meant",
            )


FORCEABLE = (extra_args.changes_the_plan,)
"""Rules that ``--force`` lets through (the user has said the plan is theirs to break); each
item it lets through is printed as a warning (``extra_args.forced``)."""

REFUSALS = (
    extra_args.changes_the_plan,
    extra_args.secrets_on_the_command_line,
    extra_args.secrets_in_the_command,
    extra_args.vllm_would_refuse,
    command_names_a_program,
    block_size_vllm_takes,
    dcp_comm_backend_known,
    ports_distinct,
    master_addr_an_address,
    prewarm_providers_known,
    retired_env.in_profile_env,
)
WARNINGS = (worker_is_planned, decimal_memory, extra_args.forced)


def quantization_matches_checkpoint(
    p: Profile, checkpoint_method: str | None, exl3_config: bool
) -> Iterator[tuple[str, str]]:
    """After the model facts: the profile's quantization against the checkpoint's own.

    Only an EXL3 mismatch is refused: vLLM maps other names onto each other on purpose
    (``gptq`` -> ``gptq_marlin``, ``awq`` -> ``awq_marlin``).
    """
    asked = p.model.quantization
    have = "exl3" if exl3_config else checkpoint_method
    if not asked or not have or asked == have or "exl3" not in (asked, have):
        return
    yield (
        "model.quantization",
        f"{asked} does not load this checkpoint, which is {have} (read from the checkpoint); "
        f"set model.quantization: {have}, or remove the key",
    )
