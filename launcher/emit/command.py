"""``b12x-launch emit``: the plan's deployment written for each target."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from launcher.artifact import ArtifactError
from launcher.contract.base import ContractError
from launcher.emit import (
    Target,
    address_warnings,
    check_target,
    manifest,
    plan_env,
    secret_override,
    shipped_profile,
    write_all,
)
from launcher.errors import EnvironmentProblem
from launcher.owned import Refused
from launcher.owned import remove as owned_remove

if TYPE_CHECKING:
    from launcher.emit.artifact import ArtifactSource
    from launcher.launch.planned import Planned

PER_NODE = ("runtime.node_rank", "runtime.master_addr")
"""Keys each target sets per node (``--node-rank``, the leader's address on Kubernetes)."""


def emit(
    planned: Planned,
    out_dir: Path,
    targets: tuple[str, ...],
    image: str,
    profile_ref: str | None,
    overrides: tuple[str, ...] = (),
    *,
    replace: bool = False,
    warn=lambda line: None,
    cache_from: ArtifactSource | None = None,
) -> list[Path]:
    """Render every target first, then write them all (a bad target writes nothing).

    With no ``profile_ref`` the profile ships with the files (a ConfigMap, a bind-mounted
    file): the container needs nothing but the image. No secret value is written anywhere:
    a secret ``--set env.X=...`` is neither in the args nor in the shipped profile.

    ``cache_from``: the cache artifact every node seeds its cache volume with first.

    Raises:
        EnvironmentProblem: ``out_dir`` holds another plan's files (unless ``replace``: they
            are removed) or cannot be written.
        ArtifactError: ``cache_from`` is a claim and compose files are asked for.
    """
    from launcher.emit import probes
    from launcher.emit import targets as table

    loaded = planned.loaded
    check_target(loaded)
    rows = [table.get(name) for name in dict.fromkeys(targets)]
    off = [r.name for r in rows if not r.kubernetes]
    if cache_from is not None and cache_from.kind == "pvc" and off:
        on = " or ".join(r.name for r in table.TARGETS if r.kubernetes)
        raise ArtifactError(
            f"--cache-from pvc:{cache_from.value}: a PersistentVolumeClaim is Kubernetes' own; "
            f"{', '.join(off)} files mount an OCI image (oci:IMAGE) or a directory on the node: "
            f"pass --target {on}, or another source"
        )
    for line in address_warnings(loaded):
        warn(line)
    public = tuple(o for o in overrides if not secret_override(o))
    shipped = ""
    if profile_ref is None:
        shipped = shipped_profile(loaded, overrides, planned.fingerprint)
    target = Target(
        loaded,
        planned.fingerprint,
        image=image,
        profile_ref=profile_ref or "",
        # the shipped profile has every --set in it already
        overrides=()
        if shipped
        else tuple(o for o in public if not o.lstrip("~").startswith(PER_NODE)),
        env=plan_env(loaded),
        shipped=shipped,
        artifact=cache_from,
        startup=probes.startup_budget(
            loaded.profile.runtime.cache_root, planned.fingerprint, artifact=cache_from is not None
        ),
    )
    files: dict[str, str] = {}
    for row in rows:
        files.update(row.render()(target))
    return write_files(out_dir, files, planned.fingerprint, replace=replace, warn=warn)


def write_files(
    out_dir: Path, files: dict[str, str], fingerprint: str, *, replace: bool, warn=lambda line: None
) -> list[Path]:
    """Write ``files`` into ``out_dir`` touching only what emit made there (``manifest``).

    Raises:
        EnvironmentProblem: its manifest there is damaged, of another layout or forged; a
            file emit would write is not its own (an operator's, or one edited since), or
            emit's own files of another plan are there without ``replace``, or the directory
            cannot be written. Nothing is written then.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise EnvironmentProblem(f"{out_dir} is not a directory; emit into a directory")
    try:
        old = manifest.read(out_dir)
    except ContractError as exc:
        raise EnvironmentProblem(str(exc)) from None
    own, edited = manifest.own_files(out_dir, old)
    theirs = [
        name
        for name in files
        if name not in own and ((out_dir / name).exists() or (out_dir / name).is_symlink())
    ]
    if theirs:
        why = ", ".join(
            f"{n} ({'edited since emit wrote it' if n in edited else 'not written by emit'})"
            for n in theirs
        )
        raise EnvironmentProblem(
            f"{out_dir} holds files emit would write but did not make: {why}. emit writes and "
            f"deletes only its own files (listed in {out_dir / manifest.MANIFEST}), --replace "
            "or not: move them away, or emit into another directory"
        )
    same_plan = old.fingerprint == fingerprint
    stale = [] if same_plan else sorted(own)  # emit's own files of another plan
    if stale and not replace:
        raise EnvironmentProblem(
            f"{out_dir} holds files of another emit ({', '.join(stale)}; plan "
            f"{old.fingerprint or '?'}, this is plan {fingerprint}); emit into an empty "
            "directory, or pass --replace to remove them and write this plan's"
        )
    for name in edited:
        if name not in files:
            warn(f"{out_dir / name}: left as it is (edited since an earlier emit wrote it)")
    kept = {n: h for n, h in own.items() if same_plan and n not in files}
    try:
        for name in stale:
            if name not in files:
                owned_remove.remove_listed(out_dir, name, own[name])
        paths = write_all(files, out_dir)
        manifest.write(
            out_dir, fingerprint, {**kept, **{n: manifest.digest(t) for n, t in files.items()}}
        )
    except (OSError, Refused) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise EnvironmentProblem(f"cannot write {out_dir}: {why}") from None
    return paths
