"""Copy an artifact onto a node's cache volume: ``python3 -m launcher.artifact.seed SRC DEST``.

What the emitted Kubernetes init container and compose service run (``launcher/emit``): SRC is
the artifact as shipped (an OCI image mounted read-only, a PVC, a host directory; a directory
or a tar), DEST a directory on the cache volume (``/cache/artifacts/<name>``) that the
launcher then restores from (``BLAUNCH_CACHE_FROM``), checking its keys against the node.

Before a byte is copied: the artifact's build id must be this image's (the launcher would
refuse it at restore anyway), the volume must have room for it, and DEST must be absent or an
artifact seed wrote (its manifest lists every file there, each with its sha256): a user's
directory, a plain file, a link, or the source itself is refused, naming it. Every file is
hashed as it is copied and cut off at its manifest's size (a damaged source fails here,
before the pod's server starts), into a temporary directory beside DEST that is renamed into
place: DEST is the old artifact or the new one, never half of one. A DEST that already holds
the same manifest is left as it is (a pod's restart copies nothing).

Exit codes: 0 copied or already there, 1 an error (one line, no traceback), 2 bad usage.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from launcher.artifact import FILES_DIR, MANIFEST_NAME, ArtifactError
from launcher.artifact.archive import Mismatch, dir_listing, extract, open_artifact
from launcher.artifact.manifest import Manifest
from launcher.buildfile import resolve_build
from launcher.buildid import BuildIdError
from launcher.owned import Refused
from launcher.owned import remove as owned_remove
from launcher.owned import write as owned_write
from launcher.units import format_size

PREFIX = "b12x-launch seed"


def free_bytes(path: Path) -> int:
    """Bytes free on the file system ``path`` (or its nearest existing parent) lies on."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def _check_build(m: Manifest, env: Mapping[str, str]) -> None:
    try:
        build_id, _ = resolve_build(env, lambda line: None)
    except BuildIdError as exc:
        raise ArtifactError(f"cannot read this image's build id: {exc}") from None
    if m.keys.build_id != build_id:
        raise ArtifactError(
            f"artifact {m.artifact_id} does not fit this image: build_id: artifact "
            f"{m.keys.build_id}, here {build_id}; the launcher would refuse it. Ship the "
            "artifact baked with this image"
        )


def _owned(dest: Path, source: Path) -> tuple[bytes, dict[str, str]] | None:
    """What the artifact seed wrote at ``dest`` holds (its manifest's bytes, path -> sha256),
    or None when nothing is there.

    Raises:
        ArtifactError: something else is there (named, with the fix).
    """
    if not os.path.lexists(dest):
        return None
    fix = "choose another DEST (a new directory under the cache volume)"
    src, dst = source.resolve(), dest.resolve()
    if src == dst or dst in src.parents or src in dst.parents:
        raise ArtifactError(f"{dest} holds or lies inside the source {source}: {fix}")
    try:
        return dir_listing(dest)
    except Refused as exc:
        raise ArtifactError(
            f"{dest} exists and is no artifact seed wrote ({exc}); seed replaces only its own: "
            f"{fix}"
        ) from None


def seed(source: Path, dest: Path, env: Mapping[str, str] | None = None) -> str:
    """Copy the artifact at ``source`` to the directory ``dest``, verified; what was done.

    Raises:
        ArtifactError: the source is no artifact, is damaged or of another build, ``dest`` is
            something other than an artifact seed wrote, or cannot be written, or lacks room.
    """
    with open_artifact(source) as reader:
        m = reader.manifest
        _check_build(m, os.environ if env is None else env)
        old = _owned(dest, source)
        if old is not None and old[0] == reader.manifest_bytes:
            return f"{dest} already holds artifact {m.artifact_id}"
        need, free = m.total_bytes + len(reader.manifest_bytes), free_bytes(dest.parent)
        if need > free:
            raise ArtifactError(
                f"artifact {m.artifact_id} needs {format_size(need)}, {dest.parent} has "
                f"{format_size(free)} free: free space on the cache volume or make it larger"
            )
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = owned_write.new_scratch(dest.parent, f".{dest.name}.")
        except OSError as exc:
            raise ArtifactError(f"cannot write {dest.parent}: {exc.strerror or exc}") from None
        try:
            target = tmp / "new"
            extract(reader, target / FILES_DIR)
            owned_write.write_bytes(target / MANIFEST_NAME, reader.manifest_bytes, root=target)
            if old is not None:
                owned_remove.check_tree(dest, old[1])  # still only what seed wrote
                owned_write.move_new(dest, tmp / "old")
            owned_write.move_new(target, dest)
            if old is not None:
                owned_remove.remove_tree(tmp / "old", old[1])
        except Mismatch as exc:
            raise ArtifactError(
                f"{source}: {exc}: the artifact is damaged; {dest} was left as it was"
            ) from None
        except Refused as exc:
            raise ArtifactError(
                f"{dest}: {exc}; seed replaces only an artifact it wrote: {dest} was left as it was"
            ) from None
        except OSError as exc:
            raise ArtifactError(
                f"cannot copy {source} to {dest}: {exc.strerror or exc}; {dest} was left as it was"
            ) from None
        finally:
            owned_write.drop_scratch(tmp)
    return f"copied artifact {m.artifact_id} ({m.summary()}) to {dest}"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or any(a.startswith("-") for a in args):
        print("usage: python3 -m launcher.artifact.seed SOURCE DEST", file=sys.stderr)
        return 2
    try:
        print(f"{PREFIX}: {seed(Path(args[0]), Path(args[1]))}", flush=True)
    except ArtifactError as exc:
        print(f"{PREFIX}: error: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
