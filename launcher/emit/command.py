"""``b12x-launch emit``: the plan's deployment written for each target."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from launcher.emit import Target, check_target, plan_env, write_all
from launcher.errors import EnvironmentProblem

if TYPE_CHECKING:
    from launcher.pipeline import Planned


def emit(
    planned: Planned,
    out_dir: Path,
    targets: tuple[str, ...],
    image: str,
    profile_ref: str,
    overrides: tuple[str, ...] = (),
) -> list[Path]:
    """Render every target first, then write them all (a bad target writes nothing)."""
    from launcher.emit import compose, k8s

    check_target(planned.loaded)
    # --node-rank and master_addr are set per node by each target.
    kept = tuple(
        o
        for o in overrides
        if not o.lstrip("~").startswith(("runtime.node_rank", "runtime.master_addr"))
    )
    target = Target(
        planned.loaded,
        planned.fingerprint,
        image=image,
        profile_ref=profile_ref,
        overrides=kept,
        env=plan_env(planned.loaded),
    )
    files: dict[str, str] = {}
    renderers = {"k8s": k8s.render, "compose": compose.render}
    for name in dict.fromkeys(targets):
        files.update(renderers[name](target))
    try:
        return write_all(files, out_dir)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot write {out_dir}: {exc.strerror or exc}") from None
