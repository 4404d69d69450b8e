"""Start vLLM for real: check the GPUs, refuse what does not fit, write the run, exec.

vLLM replaces this process (``exec``), so signals from a container runtime and the exit
code pass straight through; the planned worker inside vLLM does the rest.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from launcher import atomic, bounded
from launcher.contract import runfile
from launcher.contract.artifact import ArtifactRecord
from launcher.contract.base import ContractError, read_json
from launcher.contract.caches import CACHE_DIRS
from launcher.contract.command import command_record, shell_line
from launcher.contract.record import RECORD_SCHEMA, RECORD_SCHEMA_V1, record_name
from launcher.contract.runfile import Cards, RunFile
from launcher.errors import DoesNotFit, EnvironmentProblem, Issue, ProfileError
from launcher.launch import rendezvous, verdicts
from launcher.launch.hardware import NoGpuInfo, query_gpus
from launcher.launch.phases import LaunchPhases
from launcher.launch.planned import Planned
from launcher.launch.preflight import (
    GpuFacts,
    check_argv,
    check_gpus,
    installed_line_issues,
    require_vllm,
    visible,
    vllm_parser,
)
from launcher.launch.vllm_args import (
    VllmCommand,
    build_command,
    entry_command,
)
from launcher.owned import remove as owned_remove
from launcher.owned import write as owned_write
from launcher.plan.advice import fix_hint
from launcher.plan.record import plan_record
from launcher.profile import extra_args
from launcher.profile.vllm_flags import FLAG_KEYS, spans_nodes
from launcher.secrets import redact_argv
from launcher.vllm.can_serve import probe_installed
from launcher.vllm.options import OptionTable, table_from_parser


@dataclass(frozen=True)
class Prepared:
    planned: Planned
    run_dir: Path
    argv: list[str]
    env: dict[str, str]


def read_cards(planned: Planned, *, force: bool, gpus=None) -> GpuFacts | None:
    """What the visible GPUs hold (``gpus``: the list, default read from the driver); None
    for a CPU profile. Wrong or missing cards end here, before anything else is checked."""
    loaded = planned.loaded
    if loaded.profile.hardware.gpu == "cpu":
        return None
    if gpus is None:
        try:
            gpus = visible(query_gpus())
        except NoGpuInfo as exc:
            hw = loaded.profile.hardware
            raise EnvironmentProblem(
                f"{exc}; the profile {loaded.path} needs {hw.count}x {hw.gpu}. "
                "Use --dry-run to plan without GPUs."
            ) from None
    try:
        return check_gpus(loaded.profile, gpus, force=force)
    except EnvironmentProblem as exc:  # which profile asked for them, on every line
        raise EnvironmentProblem(f"{loaded.path}: {exc}") from None


def installed_line(planned: Planned) -> tuple[str | None, tuple[str, ...]]:
    """Probe the installed vLLM's line (its files, no import): the line to plan for when it is
    not the one planned (``vllm.runtime: auto``: the dry run could only infer one from the
    backend), and a note. What the line cannot serve is refused on the final plan, after an
    artifact's restore and before any weight loads (``check_installed_line``).

    Raises:
        EnvironmentProblem: no vLLM, or one outside the supported range.
    """
    require_vllm()
    probed = probe_installed()
    if probed is None:
        return None, ()
    installed, how = probed
    inferred = planned.deployment.runtime
    if inferred.name == installed.name or planned.loaded.profile.vllm.runtime != "auto":
        return None, ()
    return installed.name, (
        f"vllm.runtime auto: planned for the installed vLLM, {installed.name} ({how}); the dry "
        f"run inferred {inferred.name} from vllm.attention_backend. Set vllm.runtime: "
        f"{installed.name} so that dry runs plan the same",
    )


def finish(
    planned: Planned,
    *,
    run_dir: str | None,
    notes: tuple[str, ...] = (),
    check_vllm: bool = True,
    driver: str | None = None,
    gpu_kind: str | None = None,
    artifact: ArtifactRecord | None = None,
    force: bool = False,
) -> Prepared:
    """The final plan's checks and files: refuse what the installed vLLM cannot serve, what
    does not fit or what vLLM's parser rejects, make the cache directories, write the run
    (``driver``: the cards' driver, for the workers' records; ``gpu_kind``: the cards' kind,
    likewise; ``artifact``: the cache artifact restored, for the workers and the report). No
    process started."""
    if check_vllm:
        check_installed_line(planned)
    require_fit(planned)
    if check_vllm:
        check_installed_vllm(planned, force=force)
    ensure_cache_dirs(planned.command.env)
    run, command = write_run(
        planned, run_dir, notes, driver=driver, gpu_kind=gpu_kind, artifact=artifact
    )
    env = {**os.environ, **command.env}
    for note in notes:
        print(f"b12x-launch: note: {note}", file=sys.stderr)
    return Prepared(planned, run, command.argv, env)


def check_installed_line(planned: Planned) -> None:
    """Refuse what the installed vLLM's line cannot serve of the final plan (its capability
    table, the attention impl class read under DCP), unless this install passed the same plan
    before (``verdicts``; after a restore, the baked node's verdict counts).

    Raises:
        ProfileError: a key the installed vLLM cannot serve, located, with the fix.
    """
    from launcher.plan.inputs import serve_target

    probed = probe_installed()
    if probed is None:
        return
    installed, how = probed
    loaded, inputs = planned.loaded, planned.inputs

    def check() -> None:
        issues = installed_line_issues(planned, installed, how)
        if issues:
            raise ProfileError([loaded.issue(i.key, i.message) for i in issues])

    target = serve_target(inputs.facts, inputs.gpu)
    key = verdicts.plan_key(installed.name, planned.fingerprint, target)
    verdicts.unless_passed(_verdicts_folder(planned), key, check)


def check_installed_vllm(planned: Planned, *, force: bool) -> None:
    """The command through the installed vLLM's parser and ``vllm.extra_args`` by its option
    table, unless this install accepted the same command before (``verdicts``).

    Raises:
        ProfileError: what vLLM rejects, on its profile key.
    """
    loaded = planned.loaded
    flags = parser_flags(planned)

    def check() -> None:
        try:
            check_argv(flags, FLAG_KEYS)
            installed_extra_args(loaded.profile, force=force)
        except ProfileError as exc:
            raise ProfileError([loaded.issue(i.key, i.message) for i in exc.issues]) from None

    key = verdicts.key(flags, list(loaded.profile.vllm.extra_args), force)
    verdicts.unless_passed(_verdicts_folder(planned), key, check)


def _verdicts_folder(planned: Planned) -> Path:
    """The plan's calibration folder, which ``bake`` carries: the verdicts travel with it."""
    from launcher.plan.calibration import store_dir

    return store_dir(planned.loaded.profile, planned.fingerprint)


def installed_extra_args(profile, table: OptionTable | None = None, *, force: bool) -> None:
    """``vllm.extra_args`` read again by the installed vLLM's own option table (``table``,
    default read from its parser; the dry run read the shipped one, and a fork line may have
    options it lacks): what it finds is refused as the load refuses it, ``--force`` letting
    through what changes the plan. Nothing is read when there are no extra arguments.

    Raises:
        ProfileError: each item refused, on its key.
    """
    if not profile.vllm.extra_args:
        return
    table = table or table_from_parser(vllm_parser(), "the installed vLLM")
    refused = [
        Issue(f"{f.message} (read by {table.source})", key=f.key)
        for f in extra_args.findings(profile.vllm.extra_args, table)
        if not (force and f.kind == "plan")
    ]
    if refused:
        raise ProfileError(refused)


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
    planned: Planned,
    run_dir: str | None,
    notes: tuple[str, ...] = (),
    *,
    driver: str | None = None,
    gpu_kind: str | None = None,
    artifact: ArtifactRecord | None = None,
) -> tuple[Path, VllmCommand]:
    """Make the run directory, write its ``plan.json`` (what the planned worker reads) and
    ``command.txt`` (what runs, environment included) atomically; the command that points
    the workers at them."""
    loaded = planned.loaded
    run = _make_run_dir(planned, run_dir)
    replaced = _plan_in(run)
    if replaced not in (None, planned.fingerprint):
        print(
            f"b12x-launch: note: {run} held plan {replaced}; plan {planned.fingerprint} replaces "
            f"it there, and a command printed for plan {replaced} now refuses to start",
            file=sys.stderr,
        )
    command = build_command(
        loaded.profile,
        planned.plan,
        plan_file=str((run / runfile.PLAN_FILE).absolute()),
        run_dir=str(run.absolute()),
        fingerprint=planned.fingerprint,
        deployment=planned.deployment,
    )
    plan = plan_record(planned.plan, planned.fingerprint, command_record(command.argv, command.env))
    # What the worker needs, resolved here once: it reads these instead of deriving them
    # (the driver too: the worker records it without asking the driver again).
    fields = {name: getattr(plan, name) for name in type(plan).model_fields}
    fields["notes"] = [*plan.notes, *notes]
    record = RunFile(
        **fields,
        profile_data=profile_record(loaded.profile),
        profile_file=str(loaded.path),
        deployment=planned.deployment.record(),
        model_facts=planned.inputs.facts,
        cards=Cards(driver=driver, gpu_kind=gpu_kind),
        artifact=artifact,
    )
    try:
        runfile.write_run_file(run / runfile.PLAN_FILE, record)
        line = shell_line(command.argv, command.env)
        atomic.write_text(run / runfile.COMMAND_FILE, line + "\n")
    except OSError as exc:
        raise EnvironmentProblem(f"cannot write the run directory {run}: {exc}") from None
    return run, command


def profile_record(profile) -> dict:
    """The merged profile for the run directory: no ``env``, secrets in extra args masked."""
    data = profile.model_dump(mode="json", exclude={"env"})
    data["vllm"]["extra_args"] = redact_argv(data["vllm"]["extra_args"])
    return data


def launch(
    prepared: Prepared,
    *,
    join_timeout: float = rendezvous.DEFAULT_TIMEOUT,
    phases: LaunchPhases | None = None,
) -> None:
    """Meet the other nodes (multi-node mp), then replace this process with vLLM."""
    if phases is not None:
        p = prepared.planned.loaded.profile
        host = p.serving.host if p.serving.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        url = f"http://{host}:{p.serving.port}/health"
        phases.in_run_dir(prepared.run_dir, url, prepared.planned.fingerprint)
        if p.hardware.nodes > 1:
            phases.begin("rendezvous")
    try:
        meet_nodes(prepared.planned, timeout=join_timeout)  # hands its connections on to vLLM
    except BaseException as exc:  # status says why the launch stopped, not a phase running on
        if phases is not None:
            phases.recorder.fail(str(exc) or type(exc).__name__)
        raise
    if phases is not None:
        phases.before_exec()
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
        # A probe of its own: two launches probing one fixed name remove each other's.
        owned_write.probe_writable(path)
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


def _only_our_files(run: Path, records: list[Path]) -> None:
    """Refuse a run directory whose ``plan.json``, ``command.txt`` or this node's rank records
    are there but were not written by b12x-launch: a launch writes over or deletes only files
    a launch or its workers made (``--run-dir ~`` must not cost anyone a file of that name).

    Raises:
        EnvironmentProblem: naming each file that is not a launch's.
    """
    theirs = []
    plan = run / runfile.PLAN_FILE
    if plan.exists() and not _ours(plan, _a_plan):
        theirs.append(plan)
    command = run / runfile.COMMAND_FILE
    if command.exists() and not _command_ours(command):
        theirs.append(command)
    for record in records:
        if record.exists() and not _ours(record, _a_record):
            theirs.append(record)
    if theirs:
        raise EnvironmentProblem(
            f"the run directory {run} holds {', '.join(p.name for p in theirs)} not written by "
            "b12x-launch; a launch writes over or deletes only its own files there: pass "
            "another --run-dir (or move them away)"
        )


def _plan_in(run: Path) -> str | None:
    """The fingerprint of the plan a run directory holds (None: none there)."""
    path = run / runfile.PLAN_FILE
    if not path.exists():
        return None
    try:
        return runfile.read_run_file(path).fingerprint or "?"
    except ContractError:
        return "?" if _ours(path, _a_plan) else None


def _a_plan(data: dict) -> bool:
    """A run file of any version, or a plan a launch wrote (its envelope: what a person's own
    plan.json would not have)."""
    return "fingerprint" in data and "ranks" in data


def _a_record(data: dict) -> bool:
    return data.get("schema") in (RECORD_SCHEMA, RECORD_SCHEMA_V1)


def _ours(path: Path, looks_ours) -> bool:
    try:
        data = read_json(path, path.name)
    except ContractError:
        return False
    return bool(looks_ours(data))


def _command_ours(path: Path) -> bool:
    """``command.txt`` as ``write_run`` writes it: one ``env ... BLAUNCH_PLAN=...`` line."""
    try:
        text = bounded.read_text(path, 1 << 20, "command file")
    except (OSError, ValueError):
        return False
    return text.startswith("env ") and f"{runfile.PLAN_ENV}=" in text


def _make_run_dir(planned: Planned, run_dir: str | None) -> Path:
    fix = "pass --run-dir or set runtime.run_dir"
    if run_dir is not None:
        run = _writable_dir(Path(run_dir), "run directory", fix)
        hw, node = planned.loaded.profile.hardware, planned.loaded.profile.runtime.node_rank
        records = [run / record_name(r) for r in range(node * hw.count, (node + 1) * hw.count)]
        _only_our_files(run, records)
        # Records of an earlier launch into this directory belong to the plan this one
        # replaces: left there, report and qualify would read them as this boot's ranks.
        # Only this node's ranks: another node of a run may share the directory.
        for record in records:
            owned_remove.discard(run, record.name)
        return run
    root = _writable_dir(Path(planned.loaded.profile.runtime.run_dir), "run directory", fix)
    label = planned.loaded.profile.name.replace("/", "_").replace(os.sep, "_")  # one component
    name = f"{time.strftime('%Y%m%d-%H%M%S')}-{label}"
    n = 1
    while True:
        # Created here, not found: two launches in one second get a directory each
        # instead of overwriting each other's plan and records.
        run = root / (name if n == 1 else f"{name}-{n}")
        try:
            run.mkdir()
            return run
        except FileExistsError:
            n += 1
        except OSError as exc:
            raise EnvironmentProblem(f"run directory {run} cannot be made ({exc}); {fix}") from None
