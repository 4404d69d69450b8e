"""The launcher read top to bottom: load -> plan -> render -> launch.

Each step is a named function; ``cli.py`` only parses and prints.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from launcher.deployment import resolve
from launcher.launch.planned import Planned
from launcher.launch.vllm_args import build_command
from launcher.plan.fingerprint import profile_fingerprint
from launcher.plan.inputs import gather
from launcher.plan.planner import PlanInputs, Qualified, plan
from launcher.profile import LoadedProfile, load_profile

if TYPE_CHECKING:
    from launcher.artifact.bake import Baked
    from launcher.contract.artifact import ArtifactRecord
    from launcher.launch.phases import LaunchPhases
    from launcher.launch.preflight import GpuFacts
    from launcher.launch.start import Prepared
    from launcher.plan.shared import SharedInputs
    from launcher.report.sweep import Sweep


def load(path: str, overrides: tuple[str, ...] = (), *, force: bool = False) -> LoadedProfile:
    """The profile, once the environment holds no switch that became one of its keys.

    Raises:
        EnvironmentProblem: a retired ``BLAUNCH_*`` switch is set (the key to set instead).
        ProfileError: the profile cannot be read or is invalid.
    """
    from launcher.errors import EnvironmentProblem
    from launcher.profile.retired_env import in_environment

    retired = in_environment(os.environ)
    if retired:
        raise EnvironmentProblem("\n".join(retired))
    return load_profile(path, overrides, force=force)


def warnings(loaded: LoadedProfile) -> list[str]:
    """Settings that are allowed but probably a mistake, located (``FILE:LINE KEY: ...``)."""
    from launcher.profile.rules import check_warnings

    return [str(loaded.issue(k, m)) for k, m in check_warnings(loaded.profile)]


def check(path: str, overrides: tuple[str, ...] = ()) -> LoadedProfile:
    """Load and gather facts (catches unknown GPUs, architectures, bad checkpoints)."""
    loaded = load(path, overrides)
    gather(loaded, resolve(loaded.profile))
    return loaded


def check_providers(loaded: LoadedProfile) -> None:
    """Before ``prewarm`` loads them: every ``prewarm.providers`` entry names a class it can
    import (a built-in name, an entry point, or ``package.module:Class``).

    Raises:
        ProfileError: each that cannot be loaded, at its key.
    """
    from launcher.errors import ProfileError
    from launcher.profile import prewarm_providers

    known = prewarm_providers.BUILTIN
    issues = []
    for i, name in enumerate(loaded.profile.prewarm.providers):
        target = known.get(name) or (
            name if ":" in name else prewarm_providers.available().get(name)
        )
        why = prewarm_providers.load_problem(target) if target else f"unknown provider {name!r}"
        if why:
            issues.append(loaded.issue(f"prewarm.providers.{i}", f"{why}; fix or remove it"))
    if issues:
        raise ProfileError(issues)


def make_plan(
    loaded: LoadedProfile,
    *,
    b12x_sizing: bool = False,
    calibrate: bool = True,
    use_qualified: bool = True,
    shared: SharedInputs | None = None,
) -> Planned:
    """The dry run's plan of ``loaded``: its deployment, facts, calibration and qualified
    records, the plan and the vLLM command. ``shared``: facts already gathered for other
    profiles of this process (a sweep), re-used where their keys agree."""
    fingerprint = profile_fingerprint(loaded.profile)
    measured = _measured(loaded, fingerprint, calibrate, driver=None, shared=shared)
    deployment = resolve(loaded.profile)  # the one resolve of a dry run or a launch
    collect = shared.inputs if shared is not None else gather
    inputs = collect(loaded, deployment, b12x_sizing=b12x_sizing, measured=measured)
    use = calibrate and use_qualified
    inputs = replace(inputs, qualified=_qualified(loaded, fingerprint, use, None, shared=shared))
    return _planned(loaded, inputs, fingerprint, calibrate, use_qualified)


def run_sweep(
    path: str,
    overrides: tuple[str, ...],
    vary: list[tuple[str, tuple[str, ...]]],
    *,
    calibrate: bool = True,
) -> Sweep:
    """Plan every combination of ``vary`` on top of ``path`` and ``overrides``: each row is
    ``make_plan`` of its settings, so it is the dry run of them (calibration and qualified
    records included). The YAML is read once, the facts gathered once per distinct value of
    the keys they depend on (``SharedInputs``).

    Raises:
        ProfileError: the file cannot be read, or every combination is invalid.
    """
    from launcher.errors import ProfileError
    from launcher.plan.shared import SharedInputs
    from launcher.profile.load import read_profile
    from launcher.report.sweep import Row, Sweep, combinations, longest_model_len

    document = read_profile(path)  # read once, validated per combination
    shared = SharedInputs()
    rows = []
    for combo in combinations(vary):
        sets = (*overrides, *((f"{k}={v}", "--vary") for k, v in combo))
        try:
            planned = make_plan(document.load(sets), calibrate=calibrate, shared=shared)
        except ProfileError as exc:
            rows.append(Row(combo, errors=tuple(exc.issues)))
            continue
        p, memory_plan = planned.loaded.profile, planned.plan
        longest = longest_model_len(p, planned.inputs, memory_plan)
        rows.append(Row(combo, memory_plan, planned.fingerprint, longest))
    if rows and all(r.plan is None for r in rows):
        raise ProfileError(list(rows[0].errors))
    return Sweep(path, tuple(k for k, _ in vary), tuple(rows), shared.gathered)


def replan(
    planned: Planned, loaded: LoadedProfile, *, gpu_memory: tuple[int, str], driver: str | None
) -> Planned:
    """Plan ``loaded`` (the same deployment, seen on the real cards) with the facts already
    gathered, the cards' own memory, and the calibration records for this driver."""
    fingerprint = profile_fingerprint(loaded.profile)
    inputs = replace(
        planned.inputs,
        # The cards change what others hold, none of the derived values.
        deployment=planned.deployment.with_profile(loaded.profile),
        gpu_memory=gpu_memory[0],
        gpu_memory_source=gpu_memory[1],
        measured=_measured(loaded, fingerprint, planned.calibrate, driver=driver),
        qualified=_qualified(loaded, fingerprint, True, driver=driver)
        if planned.calibrate and planned.use_qualified
        else planned.inputs.qualified,
    )
    return _planned(loaded, inputs, fingerprint, planned.calibrate, planned.use_qualified)


def on_runtime(planned: Planned, runtime: str) -> Planned:
    """The same deployment planned for vLLM line ``runtime`` (``vllm.runtime`` set to it),
    from the facts already gathered, with that plan's own calibration records (its
    fingerprint differs, and the records a boot writes are kept under it)."""
    p = planned.loaded.profile
    profile = p.model_copy(update={"vllm": p.vllm.model_copy(update={"runtime": runtime})})
    loaded = replace(planned.loaded, profile=profile)
    fingerprint = profile_fingerprint(profile)
    inputs = replace(
        planned.inputs,
        deployment=resolve(profile),  # another line: other derived values
        measured=_measured(loaded, fingerprint, planned.calibrate, driver=None),
        qualified=_qualified(loaded, fingerprint, True, driver=None)
        if planned.calibrate and planned.use_qualified
        else planned.inputs.qualified,
    )
    return _planned(loaded, inputs, fingerprint, planned.calibrate, planned.use_qualified)


def pinned_at(planned: Planned, qualified: Qualified) -> Planned:
    """The same plan with its KV cache pinned to ``qualified`` (not the store's record)."""
    inputs = replace(planned.inputs, qualified=qualified)
    return _planned(planned.loaded, inputs, planned.fingerprint, planned.calibrate, False)


def _measured(
    loaded: LoadedProfile,
    fingerprint: str,
    calibrate: bool,
    driver: str | None,
    shared: SharedInputs | None = None,
):
    if not calibrate or not _stored(loaded, fingerprint):
        return {}
    from launcher.plan.calibration import load_measured

    versions = _versions(loaded, fingerprint, shared)
    return load_measured(loaded.profile, fingerprint, driver=driver, versions=versions)


def _qualified(
    loaded: LoadedProfile,
    fingerprint: str,
    use: bool,
    driver: str | None,
    shared: SharedInputs | None = None,
):
    if not use or not _stored(loaded, fingerprint):
        return None
    from launcher.plan.qualified import load_qualified

    versions = _versions(loaded, fingerprint, shared)
    return load_qualified(loaded.profile, fingerprint, driver=driver, versions=versions)


def _stored(loaded: LoadedProfile, fingerprint: str) -> bool:
    """Whether the calibration store has a folder for this plan: without one there is no
    record to read, and the record models are not loaded (a third of a dry run's imports)."""
    from launcher.contract.store_layout import folder

    return folder(loaded.profile.runtime.cache_root, fingerprint).is_dir()


def _versions(loaded: LoadedProfile, fingerprint: str, shared: SharedInputs | None):
    """The stack versions ``shared`` read once, where records exist to check against them
    (None: the loaders read them, and only when they find a record)."""
    if shared is None:
        return None
    from launcher.plan.calibration import store_dir

    return shared.versions() if store_dir(loaded.profile, fingerprint).is_dir() else None


def _planned(
    loaded: LoadedProfile,
    inputs: PlanInputs,
    fingerprint: str,
    calibrate: bool,
    use_qualified: bool = True,
):
    memory_plan = plan(loaded.profile, inputs)
    command = build_command(
        loaded.profile, memory_plan, fingerprint=fingerprint, deployment=inputs.deployment
    )
    return Planned(loaded, memory_plan, command, fingerprint, inputs, calibrate, use_qualified)


def render(planned: Planned, *, as_json: bool, color: bool = False) -> str:
    from launcher.report import render as report

    if as_json:
        return report.to_json(planned.plan, planned.command, planned.fingerprint)
    return report.render_table(planned.plan, planned.command, planned.fingerprint, color=color)


def require_fit(planned: Planned) -> None:
    """Refuse a plan that does not fit, with what would (exit 3).

    Raises:
        DoesNotFit: the plan does not fit.
    """
    from launcher.launch.start import require_fit

    require_fit(planned)


def write_command(planned: Planned, *, run_dir: str | None) -> tuple[str, str]:
    """The launch's command as one shell line, with the run directory it points the planned
    workers at (written here, plan included: the line runs as printed) and a note on it.

    Raises:
        DoesNotFit: the plan does not fit (nothing is written).
    """
    from launcher.contract.command import secret_names, shell_line
    from launcher.launch.start import require_fit, write_run

    require_fit(planned)
    run, command = write_run(planned, run_dir)
    note = (
        f"wrote the plan to {run / 'plan.json'} (card memory from the "
        f"{planned.plan.total_source}, "
        "not measured on the cards: `b12x-launch PROFILE` plans again on them and refuses what "
        "does not fit); the line sets BLAUNCH_REQUIRE_PLAN=1, so a worker that cannot read "
        "that plan refuses to start"
    )
    secrets = secret_names(command.env)
    if secrets:
        note += (
            f"; {', '.join(secrets)} (secret) is not in the line, where a process list would "
            "show it: export it in the shell that runs the line"
        )
    return shell_line(command.argv, command.env), note


def prepare(
    planned: Planned,
    *,
    force: bool,
    run_dir: str | None,
    check_vllm: bool = True,
    gpus=None,
    cache_from: str | None = None,
    cuda=None,
    phases: LaunchPhases | None = None,
) -> Prepared:
    """Everything up to the exec: the cards, the installed vLLM's line, the plan again on
    both, the cache artifact (``cache_from``) restored and the plan made again on its
    records, its checks, the run directory. No process started (``cuda``: the cards'
    ``CudaTarget``, default read from NVML when an artifact is given)."""
    from launcher.artifact.restore import check_manifest, recover_interrupted
    from launcher.launch import start

    if cache_from is not None and not force:  # the user's input first, then the machine
        check_manifest(Path(cache_from))
    recovered = recover_interrupted(cache_root(planned))
    cards = start.read_cards(planned, force=force, gpus=gpus)
    notes: tuple[str, ...] = ()
    if check_vllm:
        line, notes = start.installed_line(planned)
        if line is not None:  # before the cards: the line is part of the records' key
            planned = on_runtime(planned, line)
    if cards is not None:
        planned = on_cards(planned, cards)
        notes = (*cards.notes, *notes)
    if recovered:
        notes = (*notes, recovered)
    artifact = None
    if cache_from is not None:
        if phases is not None:
            phases.begin("restore")
        planned, artifact = restore_artifact(planned, cache_from, cards, force=force, cuda=cuda)
        notes = (*notes, _artifact_note(artifact))
        if phases is not None:
            phases.expect(artifact=True)  # the artifact's baked boots are in the store now
    if phases is not None:
        phases.begin("checks")
    driver = cards.driver if cards is not None else None
    kind = cards.kind if cards is not None else None
    return start.finish(
        planned,
        run_dir=run_dir,
        notes=notes,
        check_vllm=check_vllm,
        driver=driver,
        gpu_kind=kind,
        artifact=artifact,
        force=force,
    )


def cache_root(planned: Planned) -> Path:
    return Path(os.path.expanduser(planned.loaded.profile.runtime.cache_root))


def node_ranks(planned: Planned) -> range:
    """The ranks this node runs (a multi-node profile's node N runs N x count ...)."""
    p = planned.loaded.profile
    return range(
        p.runtime.node_rank * p.hardware.count, (p.runtime.node_rank + 1) * p.hardware.count
    )


def restore_artifact(
    planned: Planned, source: str, cards: GpuFacts | None, *, force: bool, cuda=None
) -> tuple[Planned, ArtifactRecord]:
    """Check the artifact at ``source`` against this node's keys and restore it into the
    profile's cache root, before any weight loads; then plan again, so that the plan reads
    the calibration records it brought (measured figures, census, qualified KV size).

    Raises:
        ArtifactError: it does not fit this node (the key that differs), it is damaged, or it
            cannot be written (unless ``force``: then it is ignored and the record says why).
    """
    from launcher.artifact.keys import cuda_target_or_error, node_keys
    from launcher.artifact.restore import restore

    p = planned.loaded.profile
    on_gpus = p.hardware.gpu != "cpu"
    if cuda is None:
        cuda = cuda_target_or_error(on_gpus)
    kind = (cards.kind if cards is not None else None) or p.hardware.gpu
    here = node_keys(planned.fingerprint, kind, cuda if on_gpus else None)
    record = restore(
        Path(source), cache_root(planned), here, force=force, ranks=node_ranks(planned)
    )
    if record.state in ("restored", "present"):
        record = _compile_env_note(record, planned)
    if record.state == "restored":
        inputs = planned.inputs
        planned = replan(
            planned,
            planned.loaded,
            gpu_memory=(inputs.gpu_memory, inputs.gpu_memory_source),
            driver=cards.driver if cards is not None else None,
        )
    return planned, record


def _compile_env_note(record: ArtifactRecord, planned: Planned) -> ArtifactRecord:
    """The record with a note when vLLM's compile key will differ from the baked boot's in a
    variable that follows the node (``artifact.compile_env``)."""
    from launcher.artifact import compile_env

    env = {**os.environ, **planned.command.env}  # what vLLM's processes will read
    lines = compile_env.differing(cache_root(planned), env)
    if not lines:
        return record
    note = "; ".join(filter(None, (record.note, *lines)))
    return record.model_copy(update={"note": note})


def _artifact_note(record: ArtifactRecord) -> str:
    from launcher.report.run_report import artifact_lines

    return " ".join(line.strip() for line in artifact_lines(record))


def on_cards(planned: Planned, cards: GpuFacts) -> Planned:
    """Plan again with the memory the cards really have (and what others already hold)."""
    from launcher.plan.calibration import other_cards

    inputs = replace(planned.inputs, reserved_at_launch=cards.reserved_by_others)
    planned = replace(planned, inputs=inputs)
    if other_cards(cards.kind, planned.loaded.profile):
        # The records under this profile were measured on its own cards, not these.
        planned = replace(planned, calibrate=False, inputs=replace(inputs, qualified=None))
    return replan(
        planned, planned.loaded, gpu_memory=(cards.memory, "measured"), driver=cards.driver
    )


def launch(
    planned: Planned,
    *,
    force: bool,
    run_dir: str | None,
    join_timeout: float | None = None,
    cache_from: str | None = None,
    started: float | None = None,
) -> None:
    """Prepare, then exec vLLM; the launch's phases (from ``started``, the command's start)
    go into the run directory (``launch/phases.py``)."""
    from launcher.launch import start
    from launcher.launch.phases import LaunchPhases

    phases = LaunchPhases(cache_root(planned), planned.fingerprint, started or time.time())
    phases.begin("plan", at=phases.recorder.file.started)  # read and planned before this call
    phases.begin("preflight")
    prepared = prepare(planned, force=force, run_dir=run_dir, cache_from=cache_from, phases=phases)
    if join_timeout is None:
        start.launch(prepared, phases=phases)
    else:
        start.launch(prepared, join_timeout=join_timeout, phases=phases)


def as_installed(planned: Planned) -> Planned:
    """The plan a launch here would make (and key its records by): planned for the installed
    vLLM's line when the profile leaves ``vllm.runtime`` at auto and the dry run inferred
    another (``launch.start.installed_line``)."""
    from launcher.vllm.can_serve import probe_installed

    if planned.loaded.profile.vllm.runtime != "auto":
        return planned
    probed = probe_installed()
    if probed is None or probed[0].name == planned.deployment.runtime.name:
        return planned
    return on_runtime(planned, probed[0].name)


def bake(planned: Planned, out: str, *, replace: bool, gpus=None, cuda=None) -> Baked:
    """Write the deployment's cache artifact from its cache root to ``out``, keyed as a launch
    on this machine keys it: the fingerprint on the installed vLLM's line, the cards' kind
    (``gpus``: the list, default read from NVML), their compute capability and the driver's
    CUDA version (``cuda``, default from NVML), the image's build id.

    Raises:
        ArtifactError: nothing to bake, ``out`` is taken, or the cards cannot be read.
        EnvironmentProblem: fewer cards than the profile needs.
    """
    from launcher.artifact import ArtifactError
    from launcher.artifact.bake import bake as write
    from launcher.artifact.keys import cuda_target_or_error, node_keys
    from launcher.launch.hardware import NoGpuInfo, query_gpus
    from launcher.launch.preflight import check_gpus, visible

    planned = as_installed(planned)
    p = planned.loaded.profile
    on_gpus = p.hardware.gpu != "cpu"
    kind = p.hardware.gpu
    if on_gpus:
        try:
            cards = check_gpus(p, visible(query_gpus()) if gpus is None else gpus, force=True)
        except NoGpuInfo as exc:
            raise ArtifactError(
                f"{exc}: an artifact is keyed by the cards it was compiled on; bake on the node "
                "that booted the deployment"
            ) from None
        kind = cards.kind or kind
    if cuda is None:
        cuda = cuda_target_or_error(on_gpus)
    keys = node_keys(planned.fingerprint, kind, cuda if on_gpus else None)
    return write(cache_root(planned), Path(out), profile=p.name, keys=keys, replace=replace)


def restored_artifacts(planned: Planned) -> list[str]:
    """What ``prewarm --list`` says of the cache artifacts restored into the profile's cache
    root for this plan (each with what it held); nothing when none was."""
    from launcher.artifact.restore import restored_in
    from launcher.report.run_report import artifact_lines

    restored = [r for _, r in restored_in(cache_root(planned))]
    if not restored:
        return []
    fingerprints = {planned.fingerprint, as_installed(planned).fingerprint}
    found = [r for r in restored if r.fingerprint in fingerprints]
    return [line for r in found for line in artifact_lines(r)]
