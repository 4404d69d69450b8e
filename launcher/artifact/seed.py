"""Copy an artifact onto a node's cache volume: ``python3 -m launcher.artifact.seed SRC DEST``.

What the emitted Kubernetes init container and compose service run (``launcher/emit``): SRC is
the artifact as shipped (an OCI image mounted read-only, a PVC, a host directory; a directory
or a tar), DEST a directory on the cache volume (``/cache/artifacts/<name>``) that the
launcher then restores from (``BLAUNCH_CACHE_FROM``), checking its keys against the node.

Every file is hashed as it is copied (a damaged source fails here, before the pod's server
starts), into a temporary directory beside DEST that is renamed into place: DEST is the old
artifact or the new one, never half of one. A DEST that already holds the same manifest is
left as it is (a pod's restart copies nothing).

Exit codes: 0 copied or already there, 1 an error (one line, no traceback), 2 bad usage.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from launcher.artifact import FILES_DIR, MANIFEST_NAME, ArtifactError
from launcher.artifact.archive import Mismatch, extract, open_artifact

PREFIX = "b12x-launch seed"


def seed(source: Path, dest: Path) -> str:
    """Copy the artifact at ``source`` to the directory ``dest``, verified; what was done.

    Raises:
        ArtifactError: the source is no artifact or is damaged, or ``dest`` cannot be written.
    """
    with open_artifact(source) as reader:
        m = reader.manifest
        try:
            if (dest / MANIFEST_NAME).read_bytes() == reader.manifest_bytes:
                return f"{dest} already holds artifact {m.artifact_id}"
        except OSError:
            pass
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
        except OSError as exc:
            raise ArtifactError(f"cannot write {dest.parent}: {exc.strerror or exc}") from None
        try:
            target = tmp / "new"
            extract(reader, target / FILES_DIR)
            (target / MANIFEST_NAME).write_bytes(reader.manifest_bytes)
            if dest.exists():
                dest.rename(tmp / "old")
            target.rename(dest)
        except Mismatch as exc:
            raise ArtifactError(
                f"{source}: {exc}: the artifact is damaged; {dest} was left as it was"
            ) from None
        except OSError as exc:
            raise ArtifactError(
                f"cannot copy {source} to {dest}: {exc.strerror or exc}; {dest} was left as it was"
            ) from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
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
