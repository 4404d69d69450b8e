"""``b12x-launch emit``: the plan's deployment written for each target."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from launcher.artifact import ArtifactError
from launcher.emit import (
    Target,
    address_warnings,
    check_target,
    plan_env,
    secret_override,
    shipped_profile,
    stale_files,
    write_all,
)
from launcher.errors import EnvironmentProblem

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
    from launcher.emit import compose, k8s

    loaded = planned.loaded
    check_target(loaded)
    if cache_from is not None and cache_from.kind == "pvc" and "compose" in targets:
        raise ArtifactError(
            f"--cache-from pvc:{cache_from.value}: a PersistentVolumeClaim is Kubernetes' own; "
            "compose files mount an OCI image (oci:IMAGE) or a directory on the node: pass "
            "--target k8s, or another source"
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
    )
    files: dict[str, str] = {}
    renderers = {"k8s": k8s.render, "compose": compose.render}
    for name in dict.fromkeys(targets):
        files.update(renderers[name](target))
    stale = stale_files(out_dir, files, planned.fingerprint)
    if stale and not replace:
        names = ", ".join(p.name for p in stale)
        raise EnvironmentProblem(
            f"{out_dir} holds files of another emit ({names}); emit into an empty directory, "
            "or pass --replace to remove them and write this plan's"
        )
    try:
        for path in stale:
            if path.name not in files:
                path.unlink()
        return write_all(files, out_dir)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot write {out_dir}: {exc.strerror or exc}") from None
