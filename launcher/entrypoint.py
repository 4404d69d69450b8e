"""The container's entry point: key every JIT cache by image build, then exec ``b12x-launch``.

``docker/entrypoint.sh`` runs ``python3 -m launcher.entrypoint ARGS``; this module

1. finds the image's build id (``$BLAUNCH_BUILD_ID``, else the build-info file written when
   the image was built, else computed from the installed versions),
2. makes ``$BLAUNCH_CACHE_MOUNT/<build id>/`` (default ``/cache/<build id>``) with one
   directory per JIT cache, and ``$BLAUNCH_CACHE_MOUNT/runs`` for run records, and checks
   they are writable (exit 1 with the fix if not),
3. resolves a profile name against ``$BLAUNCH_PROFILE_DIRS`` when it is not a path here,
4. before a launch (not a dry run), checks that the image's vLLM can serve the profile:
   its attention backend is registered and its quantization method exists, from the registry
   recorded when the image was built (``launcher.vllm.can_serve``, its third depth; exit 1
   naming the image to build on if not; ``BLAUNCH_RUNTIME_CHECK=0`` skips the check),
5. before a launch, passes ``--cache-from`` the cache artifact to restore: the one
   ``$BLAUNCH_CACHE_FROM`` names (an init container's copy on the cache volume, a mounted
   path), else the one built into the image (``/opt/b12x-launch/artifact``) when it holds a
   manifest; ``BLAUNCH_CACHE_FROM=none`` restores none. The launcher checks its keys against
   this node and restores it before vLLM starts (``launcher/artifact``),
6. replaces itself with ``b12x-launch ARGS --set runtime.cache_root=... ...``.

``os.execvp``: no process of ours stays between the init process and vLLM, so signals and
the exit code pass straight through. Only the launch check may import vLLM (its registries,
where the image's record does not say); arguments, the build id and the cache tree import
none of torch, vLLM or b12x.

Why the build id: vLLM's, Inductor's, Triton's and b12x's caches each key their entries,
but not all on everything that makes an object stale (a CUDA or torch upgrade under the
same vLLM version, a cutlass-dsl rebuild). One directory per image build makes an upgraded
image start from empty caches, and a restart of the same image find every kernel it
compiled before. Old builds' directories stay until ``BLAUNCH_PRUNE_CACHE=1`` removes them.

Every variable here starts with ``BLAUNCH_``: b12x puts ``B12X_*``, ``CUTE_*`` and
``CUTLASS_*`` variables into its compile-cache key.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher import buildfile, buildid
from launcher.artifact import BUILTIN_ARTIFACT, CACHE_FROM_ENV, MANIFEST_NAME
from launcher.buildfile import write_build_info  # noqa: F401  (the image build calls it)
from launcher.buildid import (  # noqa: F401  (names the image build and the tests use)
    BUILD_ID_ENV,
    BUILD_INFO_ENV,
    DEFAULT_BUILD_INFO,
    EPOCH_ENV,
    KEYED_DISTRIBUTIONS,
    BuildIdError,
    build_info,
)
from launcher.owned import remove as owned_remove
from launcher.owned import write as owned_write

# Whether the image's vLLM can serve the profile is asked where a launch is checked, not
# here: importing it loads launcher.profile (pydantic, yaml), which tripled the entrypoint's
# start-up.
if TYPE_CHECKING:
    from launcher.vllm.can_serve import Registry

MOUNT_ENV = "BLAUNCH_CACHE_MOUNT"
PRUNE_ENV = "BLAUNCH_PRUNE_CACHE"
PROFILE_DIRS_ENV = "BLAUNCH_PROFILE_DIRS"
PORT_ENV = "BLAUNCH_PORT"
RUNTIME_CHECK_ENV = "BLAUNCH_RUNTIME_CHECK"

DEFAULT_MOUNT = "/cache"
DEFAULT_PROFILE_DIRS = ("/profiles", "/opt/b12x-launch/profiles")
RUNS_SUBDIR = "runs"
MARKER = ".blaunch-build.json"
"""Written in each build's cache directory; only directories with it are ever pruned."""

LAUNCHER = "b12x-launch"
PREFIX = "b12x-launch entrypoint"

PINNED_DISTRIBUTIONS = ("vllm", "torch", "triton", "nvidia-cutlass-dsl", "flashinfer-python")
"""What the base image brings and the image build must not move (pip constraints)."""

DRY_FLAGS = ("--dry-run", "--json", "--print-command")
NO_CACHE_COMMANDS = ("validate", "schema")
"""Subcommands that read no cache: passed through without touching /cache."""


# The bases the image builds on (Dockerfile's VLLM_IMAGE; docs/operations.md, "Which base"):
# each line's ``image`` in the lines' registry, named here for the Dockerfile's tests.
def upstream_image() -> str | None:
    from launcher.vllm.lines import fallback

    return fallback().image


def fork_image() -> str:
    """The local-inference-lab vLLM fork (Gilded Gnosis) as its own compose examples publish it."""
    from launcher.vllm.lines import VLLM_LINES

    return next(line.image for line in VLLM_LINES.values() if line.markers and line.image)


TRUE = ("1", "true", "yes", "on")
FULL = (errno.ENOSPC, errno.EDQUOT)
"""A volume out of space or quota: not a permission problem, and pruning may fix it."""


class EntrypointError(BuildIdError):
    """A problem the operator fixes (printed without a traceback, exit 1); a build id that
    cannot be read (``BuildIdError``) is one too."""


# --- build id (launcher.buildid; the names stay here for the image build and its tests) ----


def write_constraints(path: str | os.PathLike) -> None:
    """Pin what the base image has installed, so adding b12x cannot move it."""
    lines = [f"{d}=={v}" for d in PINNED_DISTRIBUTIONS if (v := buildid.installed_version(d))]
    owned_write.write_text(path, "".join(line + "\n" for line in lines))
    print("constraints: " + (", ".join(lines) or "none"))


def resolve_build(env: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    """The build id in force (``launcher.buildfile.resolve_build``), its notes said here."""
    return buildfile.resolve_build(env, say=_say)


# --- the cache tree -----------------------------------------------------------------------


def cache_subdirs() -> list[str]:
    """One directory per JIT cache, as the launcher points each cache variable."""
    from launcher.contract.caches import CACHE_DIRS

    return sorted(set(CACHE_DIRS.values()))


def prepare_cache(mount: Path, build_id: str, info: Mapping[str, Any]) -> Path:
    """Create ``mount/build_id/<cache>`` and ``mount/runs`` and prove they are writable.

    Raises:
        EntrypointError: the mount (or a directory in it) cannot be written.
    """
    root = mount / build_id
    try:
        for sub in cache_subdirs():
            (root / sub).mkdir(parents=True, exist_ok=True)
        (mount / RUNS_SUBDIR).mkdir(parents=True, exist_ok=True)
        # mkdir of an existing directory succeeds on a read-only mount: write to prove it.
        for directory in (root, mount / RUNS_SUBDIR):
            owned_write.probe_writable(directory)
        marker = root / MARKER
        if not os.path.lexists(marker):
            owned_write.write_text(marker, json.dumps(dict(info), indent=2, sort_keys=True) + "\n")
    except OSError as exc:
        if exc.errno in FULL:
            raise EntrypointError(
                f"the cache volume {mount} is full ({exc.strerror or exc}: "
                f"{exc.filename or root}). Free space on it, or start once with "
                f"{PRUNE_ENV}=1 to remove the caches of other image builds."
            ) from None
        who = f"uid {os.getuid()}" if hasattr(os, "getuid") else "this user"
        raise EntrypointError(
            f"the cache volume {mount} is not writable by {who} "
            f"({exc.strerror or exc}: {exc.filename or root}). Mount a writable volume there "
            f"(docker run -v cache:{mount} ...), make it owned by {who} "
            "(a host directory: chown), or run the container as its owner (--user)."
        ) from None
    return root


def prune_other_builds(mount: Path, keep: str) -> list[Path]:
    """Remove the cache directories of other builds (only those with our marker file)."""
    removed = []
    try:
        children = sorted(mount.iterdir())
    except OSError:
        return removed
    for child in children:
        if child.name == keep or child.is_symlink() or not child.is_dir():
            continue
        if not (child / MARKER).is_file():
            continue
        try:
            owned_remove.remove_marked_tree(mount, child.name, MARKER)
            removed.append(child)
        except (OSError, ValueError) as exc:
            _say(f"warning: could not prune {child}: {exc}")
    return removed


# --- can this image's vLLM serve the profile? ---------------------------------------------


def probe_vllm(plugins: bool = False) -> Registry | None:
    """What the image's vLLM registers (``registryfile.read_registry``): the record the image
    build wrote, read without importing vLLM (unknown where there is none, or it is stale);
    with ``plugins``, vLLM's registries imported after its general plugins. None: no vLLM."""
    from launcher.registryfile import read_registry

    return read_registry(plugins)


def _launch_profile(args: list[str]):
    """The profile a ``launch`` would load (with its ``--set``s), or None if it cannot load."""
    import click

    from launcher.errors import LauncherError
    from launcher.profile import load_profile

    i = 0
    while i < len(args) and args[i] == "--debug":
        i += 1
    command = _command_table().commands["launch"]
    try:
        ctx = command.make_context("launch", args[i + 1 :], resilient_parsing=True)
        return load_profile(ctx.params["profile"], ctx.params.get("overrides") or ())
    except (LauncherError, click.ClickException, KeyError, TypeError):
        return None  # b12x-launch reports what is wrong with the arguments or the profile


def check_runtime(args: list[str], env: Mapping[str, str], probe=None) -> None:
    """Refuse a launch the image's vLLM cannot serve, before any weight loads.

    Raises:
        EntrypointError: one line per unservable key, naming the image to build on.
    """
    if env.get(RUNTIME_CHECK_ENV, "").strip().lower() in ("0", "false", "no", "off"):
        return
    loaded = _launch_profile(args)
    if loaded is None:
        return
    from launcher.profile.vllm_asks import asks_of
    from launcher.vllm.can_serve import on_registry, registry_fix

    probe = probe or probe_vllm
    try:
        caps = probe()
        if caps is None:
            return
        issues, fork, unknown = on_registry(asks_of(loaded.profile), caps)
        # Not recorded, or a name the record lacks: a plugin added since may register it.
        if issues or unknown:
            caps = probe(plugins=True)
            if caps is None:
                return
            issues, fork, _ = on_registry(asks_of(loaded.profile), caps)
    except Exception as exc:  # a vLLM that fails to import: b12x-launch's preflight says why
        _say(f"warning: could not read what this image's vLLM offers ({exc}); not checked")
        return
    if issues:
        located = [str(loaded.issue(key, message)) for key, message in issues]
        raise EntrypointError(
            f"this image's {caps.where} cannot serve the profile:\n  "
            + "\n  ".join(located)
            + f"\n  Fix: {registry_fix(fork)}. ({RUNTIME_CHECK_ENV}=0 skips this check)"
        )


# --- arguments ----------------------------------------------------------------------------


def profile_dirs(env: Mapping[str, str]) -> list[Path]:
    raw = env.get(PROFILE_DIRS_ENV)
    dirs = raw.split(os.pathsep) if raw else list(DEFAULT_PROFILE_DIRS)
    return [Path(d) for d in dirs if d]


def resolve_profile(name: str, dirs: Sequence[Path], cwd: Path) -> str:
    """``name`` if it is a path here; else the first match in ``dirs``; else ``name``.

    ``glm52``, ``glm52.yaml`` and ``profiles/glm52.yaml`` all find ``<dir>/glm52.yaml``;
    ``../../etc/shadow`` finds nothing there (a match must lie inside its directory).
    """
    path = Path(name)
    if path.is_absolute() or (cwd / path).exists():
        return name
    names = [name] if path.suffix in (".yaml", ".yml") else [name, name + ".yaml", name + ".yml"]
    for directory in dirs:
        for candidate in names:
            for rel in dict.fromkeys((candidate, Path(candidate).name)):
                found = directory / rel
                # A name finds a file in the directory, never one a `..` climbs out to.
                if found.is_file() and found.resolve().is_relative_to(directory.resolve()):
                    return str(found)
    return name


def _command_table():
    """``b12x-launch``'s click group (imports click and the CLI module only)."""
    from launcher.cli import cli

    return cli


def _value_options(command) -> set[str]:
    """Option spellings of ``command`` that take a value (``--set KEY=VALUE``)."""
    import click

    out: set[str] = set()
    for param in command.params:
        if isinstance(param, click.Option) and not param.is_flag and not param.count:
            out.update(param.opts)
    return out


def _takes_set(command) -> bool:
    return any(getattr(p, "name", None) == "overrides" for p in command.params)


def _takes_profiles(command) -> bool:
    return any(getattr(p, "name", None) in ("profile", "profiles") for p in command.params)


def _resolve_positionals(args: list[str], value_opts: set[str], resolve) -> list[str]:
    out, i, options_done = [], 0, False
    while i < len(args):
        arg = args[i]
        if options_done or not arg.startswith("-") or arg == "-":
            out.append(resolve(arg))
        elif arg == "--":
            options_done = True
            out.append(arg)
        elif arg in value_opts and i + 1 < len(args):
            out += [arg, args[i + 1]]
            i += 1
        else:
            out.append(arg)
        i += 1
    return out


def plan_args(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path | None = None
) -> tuple[list[str], bool, bool]:
    """Turn the container's arguments into ``b12x-launch``'s.

    Returns:
        (arguments, whether the command uses the caches, whether it is a dry run).
        ``--set`` options for the caches are added by ``main`` right after the
        subcommand, so a ``--set`` the user passes later still wins.
    """
    cli = _command_table()
    args = list(argv)
    lead: list[str] = []
    while args and args[0] == "--debug":
        lead.append(args.pop(0))
    if not args or args[0] in ("-h", "--help", "--version"):
        return [*lead, *args], False, False
    name = args[0] if args[0] in cli.commands else cli.default_command
    rest = args[1:] if args[0] in cli.commands else args
    command = cli.commands[name]
    if _takes_profiles(command):
        dirs, here = profile_dirs(env), cwd or Path.cwd()
        rest = _resolve_positionals(
            rest, _value_options(command), lambda a: resolve_profile(a, dirs, here)
        )
    uses_cache = name not in NO_CACHE_COMMANDS and _takes_set(command)
    dry = any(a in DRY_FLAGS for a in rest)
    return [*lead, name, *rest], uses_cache, dry


def cache_overrides(mount: Path, root: Path, env: Mapping[str, str]) -> list[str]:
    out = ["--set", f"runtime.cache_root={root}", "--set", f"runtime.run_dir={mount / RUNS_SUBDIR}"]
    port = env.get(PORT_ENV, "").strip()
    if port:
        if not port.isdigit():
            raise EntrypointError(f"{PORT_ENV}={port!r} is not a port number")
        out += ["--set", f"serving.port={port}"]
    return out


def with_artifact(args: list[str], env: Mapping[str, str]) -> list[str]:
    """A launch's arguments with ``--cache-from`` the artifact to restore, if any: the one
    ``BLAUNCH_CACHE_FROM`` names, else the one built into the image (``BUILTIN_ARTIFACT``,
    when it holds a manifest). ``none``, or a ``--cache-from`` already given, adds nothing."""
    if any(a == "--cache-from" or a.startswith("--cache-from=") for a in args):
        return args
    source = env.get(CACHE_FROM_ENV, "").strip()
    if source.lower() == "none":
        return args
    if not source:
        if not (Path(BUILTIN_ARTIFACT) / MANIFEST_NAME).is_file():
            return args
        source = BUILTIN_ARTIFACT
    _say(f"the cache artifact {source} is restored before vLLM starts (its keys checked)")
    return _insert_after_command(args, ["--cache-from", source])


def _command_of(args: list[str]) -> str | None:
    rest = [a for a in args if a != "--debug"]
    return rest[0] if rest and not rest[0].startswith("-") else None


def _insert_after_command(args: list[str], extra: list[str]) -> list[str]:
    i = 0
    while i < len(args) and args[i] == "--debug":
        i += 1
    return [*args[: i + 1], *extra, *args[i + 1 :]]


def _say(line: str) -> None:
    print(f"{PREFIX}: {line}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Prepare the cache tree and exec ``b12x-launch``; returns an exit code only on error."""
    argv = sys.argv[1:] if argv is None else list(argv)
    env = os.environ if env is None else env
    try:
        args, uses_cache, dry = plan_args(argv, env)
        launches = not dry and _command_of(args) == "launch"
        if uses_cache:
            mount = Path(env.get(MOUNT_ENV) or DEFAULT_MOUNT)
            build_id, info = resolve_build(env)
            root = mount / build_id
            # Before this build's tree is made: on a full volume, pruning is what frees it.
            if env.get(PRUNE_ENV, "").strip().lower() in TRUE and not dry:
                for gone in prune_other_builds(mount, build_id):
                    _say(f"pruned the caches of another build: {gone}")
            try:
                prepare_cache(mount, build_id, info)
                _say(f"build {build_id}: caches under {root}, run records under {mount}/runs")
            except EntrypointError as exc:
                if not dry:
                    raise
                _say(f"warning (dry run goes on): {exc}")
            args = _insert_after_command(args, cache_overrides(mount, root, env))
        if launches:
            args = with_artifact(args, env)
            check_runtime(args, env)
    except BuildIdError as exc:  # EntrypointError among them
        _say(f"error: {exc}")
        return 1
    sys.stdout.flush()
    try:
        os.execvp(LAUNCHER, [LAUNCHER, *args])
    except OSError as exc:
        _say(f"error: cannot start {LAUNCHER}: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
