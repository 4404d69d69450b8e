"""Start vLLM for real: check the GPUs, refuse what does not fit, write the run, exec.

vLLM replaces this process (``exec``), so signals from a container runtime and the exit
code pass straight through; the planned worker inside vLLM does the rest.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from launcher import atomic
from launcher.deployment import resolve
from launcher.errors import DoesNotFit, EnvironmentProblem, ProfileError
from launcher.launch import rendezvous
from launcher.launch.hardware import NoGpuInfo, query_gpus
from launcher.launch.preflight import (
    GpuFacts,
    check_argv,
    check_gpus,
    require_vllm,
    runtime_issues,
    visible,
)
from launcher.launch.vllm_args import (
    CACHE_DIRS,
    FLAG_KEYS,
    RUN_FILE_VERSION,
    VllmCommand,
    build_command,
    entry_command,
    spans_nodes,
)
from launcher.pipeline import Planned, on_runtime, replan
from launcher.profile.vllm_runtime import probe_installed
from launcher.report.render import fix_hint, shell_line, to_dict
from launcher.secrets import redact_argv


@dataclass(frozen=True)
class Prepared:
    planned: Planned
    run_dir: Path
    argv: list[str]
    env: dict[str, str]


def prepare(
    planned: Planned, *, force: bool, run_dir: str | None, check_vllm: bool = True, gpus=None
) -> Prepared:
    """Everything up to the exec: checks, final plan, run directory. No process started."""
    loaded = planned.loaded
    profile = loaded.profile
    notes: tuple[str, ...] = ()
    cards = _gpu_facts(planned, force=force, gpus=gpus) if profile.hardware.gpu != "cpu" else None
    if check_vllm:
        # The line before the replan: it is part of the fingerprint that picks the records.
        require_vllm()
        planned, notes = on_installed_runtime(planned)
    if cards is not None:
        planned, notes = _replan(planned, cards), (*cards.notes, *notes)
    require_fit(planned)
    if check_vllm:
        flags = parser_flags(planned)
        try:
            check_argv(flags, FLAG_KEYS)
        except ProfileError as exc:
            raise ProfileError([loaded.issue(i.key, i.message) for i in exc.issues]) from None
    ensure_cache_dirs(planned.command.env)
    run, command = write_run(planned, run_dir, notes)
    env = {**os.environ, **command.env}
    for note in notes:
        print(f"b12x-launch: note: {note}", file=sys.stderr)
    return Prepared(planned, run, command.argv, env)


def on_installed_runtime(planned: Planned) -> tuple[Planned, tuple[str, ...]]:
    """Probe the installed vLLM's line (its files, no import); refuse what it cannot serve,
    before any weight loads. With ``vllm.runtime: auto`` the plan is made for the line found
    (the dry run could only infer one from the backend).

    Raises:
        ProfileError: a key the installed vLLM cannot serve, located, with the fix.
    """
    probed = probe_installed()
    if probed is None:
        return planned, ()
    installed, how = probed
    loaded = planned.loaded
    issues = runtime_issues(loaded.profile, installed, how)
    if issues:
        raise ProfileError([loaded.issue(i.key, i.message) for i in issues])
    inferred = resolve(loaded.profile).runtime
    if inferred.name == installed.name:
        return planned, ()
    planned = on_runtime(planned, installed.name)
    return planned, (
        f"vllm.runtime auto: planned for the installed vLLM, {installed.name} ({how}); the dry "
        f"run inferred {inferred.name} from vllm.attention_backend. Set vllm.runtime: "
        f"{installed.name} so that dry runs plan the same",
    )


def require_fit(planned: Planned) -> None:
    """Raise ``DoesNotFit`` (exit 3, with what would fit) when the plan does not fit."""
    if not planned.plan.fits:
        raise DoesNotFit(
            "the plan does not fit: "
            + "; ".join(planned.plan.reasons)
            + ". "
            + fix_hint(planned.plan)
        )


def write_run(
    planned: Planned, run_dir: str | None, notes: tuple[str, ...] = ()
) -> tuple[Path, VllmCommand]:
    """Make the run directory, write its ``plan.json`` (what the planned worker reads) and
    ``command.txt`` (what runs, environment included) atomically; the command that points
    the workers at them."""
    loaded = planned.loaded
    run = _make_run_dir(planned, run_dir)
    command = build_command(
        loaded.profile,
        planned.plan,
        plan_file=str((run / "plan.json").absolute()),
        run_dir=str(run.absolute()),
        fingerprint=planned.fingerprint,
        deployment=planned.deployment,
    )
    record = to_dict(planned.plan, command, planned.fingerprint)
    record["profile_data"] = profile_record(loaded.profile)
    record["profile_file"] = loaded.path
    # What the worker needs, resolved here once: it reads these instead of deriving them.
    record["run_file"] = RUN_FILE_VERSION
    record["deployment"] = (planned.deployment or resolve(loaded.profile)).record()
    record["model_facts"] = planned.inputs.facts.record()
    record["notes"] = [*record["notes"], *notes]
    try:
        atomic.write_json(run / "plan.json", record)
        atomic.write_text(run / "command.txt", shell_line(command) + "\n")
    except OSError as exc:
        raise EnvironmentProblem(f"cannot write the run directory {run}: {exc}") from None
    return run, command


def profile_record(profile) -> dict:
    """The merged profile for the run directory: no ``env``, secrets in extra args masked."""
    data = profile.model_dump(mode="json", exclude={"env"})
    data["vllm"]["extra_args"] = redact_argv(data["vllm"]["extra_args"])
    return data


def launch(
    planned: Planned,
    *,
    force: bool,
    run_dir: str | None,
    join_timeout: float = rendezvous.DEFAULT_TIMEOUT,
) -> None:
    """Prepare, meet the other nodes (multi-node mp), then replace this process with vLLM."""
    prepared = prepare(planned, force=force, run_dir=run_dir)
    meet_nodes(prepared.planned, timeout=join_timeout)  # hands its connections on to vLLM
    kv = prepared.planned.plan.kv
    print(
        f"b12x-launch: plan {prepared.planned.fingerprint}: {kv.tokens:,} KV tokens "
        f"({kv.max_concurrency:.2f} x {kv.max_model_len:,}); run {prepared.run_dir}",
        file=sys.stderr,
    )
    sys.stderr.flush()
    sys.stdout.flush()
    try:
        os.execvpe(prepared.argv[0], prepared.argv, prepared.env)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot start {prepared.argv[0]!r}: {exc}") from None


def meet_nodes(planned: Planned, *, timeout: float) -> None:
    """Every node of a multi-node mp profile joins node 0 before any of them starts vLLM;
    node 0's exit then stops the others (``rendezvous.hand_on``)."""
    p = planned.loaded.profile
    if not spans_nodes(p):
        return
    meeting = rendezvous.Meeting(
        nodes=p.hardware.nodes,
        node_rank=p.runtime.node_rank,
        master_addr=str(p.runtime.master_addr),
        master_port=p.runtime.master_port,
        fingerprint=planned.fingerprint,
    )
    conns = rendezvous.meet(meeting, timeout=timeout, say=_say)
    rendezvous.hand_on(meeting, conns)


def _say(line: str) -> None:
    print(f"b12x-launch: {line}", file=sys.stderr, flush=True)


def against_cards(planned: Planned, *, force: bool, gpus=None) -> tuple[Planned, tuple[str, ...]]:
    """The plan again with the memory the visible GPUs have free now, and the notes on them
    (``gpus``: the GPU list, default read from the driver)."""
    facts = _gpu_facts(planned, force=force, gpus=gpus)
    return _replan(planned, facts), facts.notes


def _gpu_facts(planned: Planned, *, force: bool, gpus) -> GpuFacts:
    if gpus is None:
        try:
            gpus = visible(query_gpus())
        except NoGpuInfo as exc:
            hw = planned.loaded.profile.hardware
            raise EnvironmentProblem(
                f"{exc}; the profile needs {hw.count}x {hw.gpu}. "
                "Use --dry-run to plan without GPUs."
            ) from None
    return check_gpus(planned.loaded.profile, gpus, force=force)


def _replan(planned: Planned, facts: GpuFacts) -> Planned:
    """Plan again with the memory the cards really have (and what others already hold)."""
    p = planned.loaded.profile
    hardware = p.hardware.model_copy(
        update={"reserved_by_others": max(p.hardware.reserved_by_others, facts.reserved_by_others)}
    )
    loaded = replace(planned.loaded, profile=p.model_copy(update={"hardware": hardware}))
    return replan(
        planned, loaded, gpu_memory=(facts.memory, "measured"), driver=facts.driver or None
    )


def parser_flags(planned: Planned) -> list[str]:
    """The argv after the command and model path, as ``--model PATH ...`` for the parser."""
    p = planned.loaded.profile
    argv = planned.command.argv
    start = len(entry_command(p))
    return ["--model", argv[start], *argv[start + 1 :]]


def _writable_dir(path: Path, what: str, fix: str) -> Path:
    """Create ``path`` and prove it takes a file (mkdir alone passes on a read-only mount)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".writable"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise EnvironmentProblem(
            f"{what} {path} is not writable ({exc.strerror or exc}); {fix}"
        ) from None
    return path


def ensure_cache_dirs(env: dict[str, str]) -> None:
    """Create every JIT cache directory; an unwritable one is an error before vLLM starts."""
    for var in CACHE_DIRS:
        _writable_dir(
            Path(env[var]),
            f"cache directory ({var})",
            "set runtime.cache_root to a writable directory",
        )


def _make_run_dir(planned: Planned, run_dir: str | None) -> Path:
    root = Path(run_dir) if run_dir else Path(planned.loaded.profile.runtime.run_dir)
    if run_dir is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        root = root / f"{stamp}-{planned.loaded.profile.name}"
    return _writable_dir(root, "run directory", "pass --run-dir or set runtime.run_dir")
