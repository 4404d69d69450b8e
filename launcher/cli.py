"""The ``b12x-launch`` command line: parsing and printing only.

Exit codes: 0 ok, 1 bad profile or environment, 2 bad usage, 3 the plan does not fit.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from launcher import __version__
from launcher.emit import targets as emit_targets
from launcher.errors import EXIT_DOES_NOT_FIT, EXIT_USER_ERROR, LauncherError, ProfileError

if TYPE_CHECKING:
    pass


class _Path(click.Path):
    """``click.Path`` that refuses an empty string (it would read as the current directory)."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.strip():
            self.fail("an empty path; give a file or directory", param, ctx)
        return super().convert(value, param, ctx)


CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class DefaultGroup(click.Group):
    """``b12x-launch PROFILE ...`` means ``b12x-launch launch PROFILE ...``."""

    default_command = "launch"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # --debug wherever it is typed (before a literal --): the group's flag
        cut = args.index("--") if "--" in args else len(args)
        if "--debug" in args[:cut]:
            args = ["--debug", *(a for a in args[:cut] if a != "--debug"), *args[cut:]]
        i = 0
        while i < len(args) and args[i] in ("--debug",):
            i += 1
        if (
            i < len(args)
            and args[i] not in self.commands
            and args[i] not in ("-h", "--help", "--version")
        ):
            self._refuse_a_typo(ctx, args[i])
            args = [*args[:i], self.default_command, *args[i:]]
        return super().parse_args(ctx, args)

    def _refuse_a_typo(self, ctx: click.Context, word: str) -> None:
        """``b12x-launch prewram p.yaml`` is a mistyped command, not a profile named prewram:
        a word close to a command that is no file and does not look like one is refused."""
        import os

        if word.startswith("-") or os.path.exists(word) or "/" in word or "." in word:
            return
        import difflib  # only for a word that is neither a command nor a file: not every run

        close = difflib.get_close_matches(word, list(self.commands), n=1, cutoff=0.6)
        if close:
            raise click.UsageError(
                f"no such command {word!r}; did you mean {close[0]!r}? "
                f"(a profile is a file: {word!r} does not exist)",
                ctx,
            )

    def main(self, *args, **kwargs):
        # Every line printed, errors and usage included, with its control sequences escaped:
        # a record's or a flag's text never drives the terminal (launcher/terminal.py).
        from launcher.terminal import guarded

        with guarded():
            return super().main(*args, **kwargs)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except LauncherError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(_format_error(exc), err=True)
            ctx.exit(exc.exit_code)
        except (
            click.exceptions.Exit,
            click.ClickException,
            SystemExit,
            KeyboardInterrupt,
            BrokenPipeError,
        ):
            raise
        except Exception as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(
                f"internal error (a bug in b12x-launch): {type(exc).__name__}: {exc}\n"
                "rerun with --debug for the traceback, and please report it",
                err=True,
            )
            ctx.exit(EXIT_USER_ERROR)


def _format_error(exc: LauncherError) -> str:
    if isinstance(exc, ProfileError):
        lines = [f"error: {i}" for i in exc.issues]
        return "\n".join(lines)
    return f"error: {exc}"


@click.group(cls=DefaultGroup, context_settings=CONTEXT)
@click.version_option(__version__, prog_name="b12x-launch")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Plan every GPU's memory for a vLLM deployment, then launch it.

    \b
      b12x-launch profiles/glm52.yaml --dry-run    print the plan and the vLLM command
      b12x-launch profiles/glm52.yaml              check the GPUs, then exec vLLM
      b12x-launch prewarm profiles/glm52.yaml      fill the JIT caches before the first boot
      b12x-launch qualify profiles/glm52.yaml      find and pin the largest KV that survives load
      b12x-launch report runs/<run>                a run's plan against its measurements
      b12x-launch bake profiles/glm52.yaml OUT     its compiled caches as one artifact
      b12x-launch sweep profiles/glm52.yaml --vary parallel.decode_context=1,2,4
                                                   what fits, for every combination
      b12x-launch validate profiles/*.yaml         check profiles
      b12x-launch schema > profile.schema.json     JSON Schema for editors
      b12x-launch schema --run-file | --record     the run file's and the record's

    Exit codes: 0 ok, 1 bad profile or environment, 2 bad usage, 3 the plan does not fit.
    """
    ctx.ensure_object(dict)["debug"] = debug


def _warn(lines: list[str]) -> None:
    for line in lines:
        click.echo(f"warning: {line}", err=True)


def _set_option(f):
    return click.option(
        "--set",
        "overrides",
        multiple=True,
        metavar="KEY=VALUE",
        help="Override a profile key (value parsed as YAML); ~KEY deletes it. Repeatable.",
    )(f)


def _finite(value: float | None, param: click.Parameter) -> float | None:
    """A float option that is a number: ``nan`` passes every range check."""
    if value is not None and value != value:
        raise click.BadParameter("must be a number of seconds (got nan)", param=param)
    return value


def _checked(value: str | None, param: click.Parameter, check: str) -> str | None:
    """An emit option checked by ``launcher.emit``'s ``check`` (a usage error when wrong)."""
    if value is None:
        return None
    from launcher import emit

    problem = getattr(emit, check)(value)
    if problem:
        raise click.BadParameter(problem, param=param)
    return value


def _plot_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    from launcher.report.plot import check_path

    try:
        check_path(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


def _plot_option(what: str):
    return click.option(
        "--plot",
        "plot_file",
        type=_Path(dir_okay=False),
        default=None,
        callback=_plot_path,
        metavar="FILE",
        help=f"Draw {what} into FILE (.svg or .png; needs matplotlib).",
    )


@cli.command(context_settings=CONTEXT)
@click.argument("profile", type=_Path(dir_okay=False))
@_set_option
@click.option("--dry-run", is_flag=True, help="Print the plan and the vLLM command; touch no GPU.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON (implies --dry-run).")
@click.option(
    "--print-command",
    is_flag=True,
    help="Write the plan into a run directory (no GPU) and print the command that serves it: "
    "one shell line, environment included (env K=V ... vllm serve ...).",
)
@click.option(
    "--b12x-sizing",
    is_flag=True,
    help="Size workspaces with b12x's own plan functions (imports b12x and torch).",
)
@click.option("--no-calibration", is_flag=True, help="Ignore earlier measurements.")
@click.option(
    "--force",
    is_flag=True,
    help="Launch even if the GPUs do not match the profile, or vllm.extra_args sets what the "
    "plan sized (the plan is then not what runs; each such item is printed).",
)
@click.option("--strict-jit", is_flag=True, help="A kernel compiled after sizing is fatal.")
@click.option(
    "--node-rank",
    type=int,
    default=None,
    help="This node's rank in a multi-node profile (sets runtime.node_rank).",
)
@click.option(
    "--join-timeout",
    type=click.FloatRange(min=1),
    callback=lambda ctx, param, v: _finite(v, param),
    default=None,
    metavar="SECONDS",
    help="Multi-node: how long a node waits for the others to join before it stops (default 600).",
)
@click.option(
    "--run-dir",
    type=_Path(file_okay=False),
    default=None,
    help="Where this run's plan and measurements go (default: runtime.run_dir).",
)
@click.option(
    "--cache-from",
    type=_Path(exists=True),
    default=None,
    metavar="ARTIFACT",
    help="Restore the deployment's compiled caches and calibration records from ARTIFACT (what "
    "`bake` wrote) before vLLM starts. One baked for another plan, GPU, driver or image build "
    "is refused, naming the key; with --force the boot goes on without it.",
)
@_plot_option("the plan, a stacked bar per rank (implies --dry-run)")
def launch(
    profile: str,
    overrides: tuple[str, ...],
    dry_run: bool,
    as_json: bool,
    print_command: bool,
    b12x_sizing: bool,
    no_calibration: bool,
    force: bool,
    strict_jit: bool,
    node_rank: int | None,
    join_timeout: float | None,
    run_dir: str | None,
    cache_from: str | None,
    plot_file: str | None,
) -> None:
    """Plan PROFILE and launch vLLM (or, with --dry-run, print the plan)."""
    import time

    started = time.time()  # the launch's first phase (plan) starts here
    from launcher import pipeline

    if node_rank is not None:  # its errors name the flag typed, not --set
        overrides = (*overrides, (f"runtime.node_rank={node_rank}", "--node-rank"))
    if strict_jit:
        overrides = (*overrides, "prewarm.strict_jit=true")
    if print_command and (as_json or dry_run or plot_file):
        other = "--json" if as_json else "--dry-run" if dry_run else "--plot"
        raise click.UsageError(
            f"--print-command prints the launch line alone (environment included) and writes "
            f"its plan into a run directory; {other} prints the plan: use one of them"
        )
    if cache_from and (print_command or as_json or dry_run or plot_file):
        raise click.UsageError(
            "--cache-from restores an artifact before a launch; a plan that is only printed "
            "restores nothing: drop one of them"
        )
    loaded = pipeline.load(profile, overrides, force=force)
    _warn(pipeline.warnings(loaded))
    planned = pipeline.make_plan(loaded, b12x_sizing=b12x_sizing, calibrate=not no_calibration)
    if print_command:
        line, note = pipeline.write_command(planned, run_dir=run_dir)
        click.echo(f"b12x-launch: note: {note}", err=True)
        click.echo(line)
        return
    if as_json or dry_run or plot_file:
        click.echo(pipeline.render(planned, as_json=as_json, color=sys.stdout.isatty()), nl=False)
        if plot_file:
            from launcher.report.plot import plot_plan

            click.echo(f"plot: {plot_plan(planned.plan, plot_file, planned.fingerprint)}", err=True)
        if not planned.plan.fits:
            sys.exit(EXIT_DOES_NOT_FIT)
        return
    pipeline.launch(
        planned,
        force=force,
        run_dir=run_dir,
        join_timeout=join_timeout,
        cache_from=cache_from,
        started=started,
    )


@cli.command(context_settings=CONTEXT)
@click.argument("profiles", nargs=-1, required=True, type=_Path(dir_okay=False))
@_set_option
def validate(profiles: tuple[str, ...], overrides: tuple[str, ...]) -> None:
    """Check PROFILES: schema, coupling rules and model facts. Plans are not fitted."""
    from launcher import pipeline

    failed = 0
    for path in profiles:
        try:
            loaded = pipeline.check(path, overrides)
            _warn(pipeline.warnings(loaded))
            click.echo(f"ok: {path}")
        except ProfileError as exc:
            failed += 1
            click.echo(_format_error(exc), err=True)
    if failed:
        sys.exit(1)


@cli.command(context_settings=CONTEXT)
@click.option(
    "--run-file",
    "document",
    flag_value="run-file",
    help="The run file's (plan.json, version 3) instead of the profile's.",
)
@click.option(
    "--record",
    "document",
    flag_value="record",
    help="The rank record's (measure-rank<N>.json, version 2) instead.",
)
@click.option(
    "--qualified",
    "document",
    flag_value="qualified",
    help="The qualified record's (qualified.json, version 2) instead.",
)
def schema(document: str | None) -> None:
    """Print the profile JSON Schema (or a run file's or record's: docs/schemas/)."""
    import json

    if document is None:
        from launcher.profile.schema import json_schema

        click.echo(json.dumps(json_schema(), indent=2))
        return
    from launcher.contract.schema import json_schema as contract_schema

    click.echo(json.dumps(contract_schema(document), indent=2))


@cli.command(context_settings=CONTEXT)
@click.argument("profile", type=_Path(dir_okay=False))
@_set_option
@click.option("--list", "list_only", is_flag=True, help="List what would be compiled; no GPU.")
@click.option("--device", type=int, default=0, show_default=True, help="CUDA device to use.")
def prewarm(profile: str, overrides: tuple[str, ...], list_only: bool, device: int) -> None:
    """Fill the compile caches for PROFILE ahead of serving, under the serving environment."""
    from launcher import pipeline
    from launcher.runtime.prewarm.command import list_specializations, run_prewarm

    # Calibrated: the census of earlier boots is part of what the prewarm compiles.
    loaded = pipeline.load(profile, overrides)
    pipeline.check_providers(loaded)
    planned = pipeline.make_plan(loaded)
    if list_only:
        list_specializations(planned, click.echo)
        for line in pipeline.restored_artifacts(planned):
            click.echo(line)
    else:
        from launcher.launch.start import ensure_cache_dirs

        ensure_cache_dirs(planned.command.env)
        run_prewarm(planned, device, click.echo)


@cli.command(context_settings=CONTEXT)
@click.argument("profile", type=_Path(dir_okay=False))
@click.argument("out", type=_Path())
@_set_option
@click.option("--replace", is_flag=True, help="Replace the artifact already at OUT.")
def bake(profile: str, out: str, overrides: tuple[str, ...], replace: bool) -> None:
    """After a boot of PROFILE on its cards, write its compiled caches (Triton, Inductor,
    vLLM's compile and AOT caches, CuTe DSL, b12x, DeepGEMM, FlashInfer) and its calibration
    records into one artifact at OUT: a directory, or a tar when OUT ends in .tar, .tar.gz or
    .tgz. A fresh node restores it with `b12x-launch PROFILE --cache-from OUT`."""
    from launcher import pipeline

    planned = pipeline.make_plan(pipeline.load(profile, overrides))
    baked = pipeline.bake(planned, out, replace=replace)
    _warn(baked.notes)
    m, k = baked.manifest, baked.manifest.keys
    where = f"{k.gpu_kind}" + (f", compute {k.compute_capability}" if k.compute_capability else "")
    click.echo(f"baked {baked.path}: artifact {m.artifact_id} for plan {k.fingerprint} ({where})")
    click.echo(f"  build {k.build_id}" + (f", CUDA {k.cuda_driver}" if k.cuda_driver else ""))
    click.echo(f"  {m.summary()}")


@cli.command(context_settings=CONTEXT)
@click.argument("run_dir", type=_Path(file_okay=False, exists=True))
@click.option(
    "--log",
    "log_file",
    type=_Path(dir_okay=False, exists=True),
    default=None,
    help="A saved vLLM log to read the KV lines from (default: RUN_DIR/vllm.log).",
)
@_plot_option("each rank's plan beside its measurement")
def report(run_dir: str, log_file: str | None, plot_file: str | None) -> None:
    """Print the plan of RUN_DIR against its workers' measurement records."""
    from pathlib import Path

    from launcher.report.run_report import plot_run_dir, render_run

    click.echo(render_run(Path(run_dir), Path(log_file) if log_file else None), nl=False)
    if plot_file:
        click.echo(f"plot: {plot_run_dir(Path(run_dir), plot_file)}", err=True)


@cli.command(context_settings=CONTEXT)
@click.argument("run_dir", type=_Path())
@click.option(
    "--watch/--once",
    default=None,
    help="Follow the boot until the server answers (default on a terminal), or print it once.",
)
@click.option("--json", "as_json", is_flag=True, help="The status as JSON (one object a line).")
@click.option(
    "--interval",
    type=click.FloatRange(0.1, 3600),
    default=1.0,
    show_default=True,
    help="Seconds between reads while watching.",
)
def status(run_dir: str, watch: bool | None, as_json: bool, interval: float) -> None:
    """Show a boot's phases from RUN_DIR: elapsed and expected per phase and process, the
    slowest rank, and a phase running past 3x its expected time (and 60 s) as possibly stuck.
    Reads the run directory only: it works beside the server, or from another container."""
    from pathlib import Path

    from launcher.report import status as boot

    if watch is None:
        watch = sys.stdout.isatty() and not as_json
    try:
        shown = boot.show(Path(run_dir), watch=watch, as_json=as_json, interval=interval)
    except boot.NotARunDir as exc:
        raise click.ClickException(str(exc)) from None
    why = boot.nothing_shown(shown)
    if why:
        raise click.ClickException(why)


def _artifact_source(ctx: click.Context, param: click.Parameter, value: str | None):
    if value is None:
        return None
    from launcher.emit.artifact import parse_source

    try:
        return parse_source(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _vary(ctx: click.Context, param: click.Parameter, specs: tuple[str, ...]):
    from launcher.report.sweep import combinations, parse_vary

    try:
        vary = [parse_vary(s) for s in specs]
        combinations(vary)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return vary


@cli.command(context_settings=CONTEXT)
@click.argument("profile", type=_Path(dir_okay=False))
@click.option(
    "--vary",
    multiple=True,
    required=True,
    metavar="KEY=V1,V2,...",
    callback=_vary,
    help="A profile key and the values to try (each parsed as YAML). Repeatable: every "
    "combination is planned.",
)
@_set_option
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@click.option("--no-calibration", is_flag=True, help="Ignore earlier measurements.")
@_plot_option("KV tokens against the first varied key")
def sweep(
    profile: str,
    vary: list,
    overrides: tuple[str, ...],
    as_json: bool,
    no_calibration: bool,
    plot_file: str | None,
) -> None:
    """Plan every combination of the --vary settings (no GPU): one row each, with whether it
    fits, its KV tokens, concurrency, bounding rank, the longest max_model_len that fits and,
    for a row that does not fit, why. Exit 3 when no combination fits."""
    from launcher import pipeline
    from launcher.report import sweep_report
    from launcher.report.sweep import fitting

    result = pipeline.run_sweep(profile, overrides, vary, calibrate=not no_calibration)
    if as_json:
        click.echo(sweep_report.to_json(result), nl=False)
    else:
        click.echo(sweep_report.render_table(result, color=sys.stdout.isatty()), nl=False)
    if plot_file:
        from launcher.report.plot import plot_sweep

        click.echo(f"plot: {plot_sweep(result, plot_file)}", err=True)
    if not fitting(result):
        sys.exit(EXIT_DOES_NOT_FIT)


@cli.command(context_settings=CONTEXT)
@click.argument("profile", type=_Path(dir_okay=False))
@_set_option
@click.option(
    "--verify", is_flag=True, help="Boot again at the qualified size and rerun the workload."
)
@click.option("--force", is_flag=True, help="Run even if the GPUs do not match the profile.")
@click.option(
    "--run-dir",
    type=_Path(file_okay=False),
    default=None,
    help="Where the boots' plans, logs and the qualified record go (default: runtime.run_dir).",
)
def qualify(
    profile: str, overrides: tuple[str, ...], verify: bool, force: bool, run_dir: str | None
) -> None:
    """Find the largest KV cache that survives PROFILE's worst case, and pin it.

    Boots vLLM, drives the qualify workload (default: prompts at max_model_len,
    max_num_seqs long decodes) through the API on 127.0.0.1, samples each GPU's free
    memory, stops vLLM and records the KV size that leaves exactly memory.safety_margin
    free at the worst moment. The next launch and dry run of PROFILE use it.
    """
    from launcher import pipeline
    from launcher.qualify.command import qualify as run_qualify
    from launcher.qualify.progress import Progress

    loaded = pipeline.load(profile, (*overrides, "serving.host=127.0.0.1"), force=force)
    _warn(pipeline.warnings(loaded))
    with Progress() as progress:
        record = run_qualify(loaded, run_dir=run_dir, verify=verify, force=force, progress=progress)
    kv = record.kv
    click.echo(f"qualified: {kv.blocks} blocks, {kv.tokens} tokens, {kv.bytes} bytes")


@cli.command(context_settings=CONTEXT)
@click.argument("profile", type=_Path(dir_okay=False))
@click.argument("out_dir", type=_Path(file_okay=False))
@_set_option
@click.option(
    "--target",
    "targets",
    type=click.Choice(emit_targets.names()),
    multiple=True,
    help=emit_targets.help_text(),
)
@click.option(
    "--image",
    default="b12x-launch:latest",
    show_default=True,
    callback=lambda ctx, param, v: _checked(v, param, "image_problem"),
    help="Image to run.",
)
@click.option(
    "--profile-ref",
    default=None,
    metavar="PATH",
    callback=lambda ctx, param, v: _checked(v, param, "profile_ref_problem"),
    help="The profile as the container finds it in the image. Default: the profile ships with "
    "the files (a ConfigMap, a file beside the compose files), mounted at /profiles.",
)
@click.option(
    "--replace",
    is_flag=True,
    help="Remove the files an earlier emit left in OUT_DIR for another plan, instead of refusing.",
)
@click.option(
    "--cache-from",
    default=None,
    metavar="SOURCE",
    callback=_artifact_source,
    help="Seed every node's cache with this artifact (what `bake` wrote) before the server "
    "starts: oci:IMAGE (a FROM scratch image holding it), pvc:CLAIM[/PATH] (Kubernetes) or an "
    "absolute directory on the nodes.",
)
def emit(
    profile: str,
    out_dir: str,
    overrides: tuple[str, ...],
    targets: tuple[str, ...],
    image: str,
    profile_ref: str | None,
    replace: bool,
    cache_from,
) -> None:
    """Write PROFILE's deployment for other targets into OUT_DIR: a Kubernetes
    LeaderWorkerSet (leaderworkerset.yaml) and docker compose files (compose.node<N>.yaml),
    or a KServe LLMInferenceService (--target kserve). The leader's startup probe lasts as
    long as this plan's measured boots allow (the files' header says which). The plan must
    fit (exit 3 otherwise); no GPU is needed."""
    from pathlib import Path

    from launcher import pipeline
    from launcher.emit.command import emit as write

    loaded = pipeline.load(profile, overrides)
    _warn(pipeline.warnings(loaded))
    planned = pipeline.make_plan(loaded)
    pipeline.require_fit(planned)  # exit 3, saying what would fit
    paths = write(
        planned,
        Path(out_dir),
        targets or emit_targets.defaults(),
        image,
        profile_ref,
        overrides,
        replace=replace,
        warn=lambda line: _warn([line]),
        cache_from=cache_from,
    )
    for path in paths:
        click.echo(f"wrote {path}")


def main() -> None:
    cli(prog_name="b12x-launch")
