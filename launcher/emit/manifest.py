"""What ``emit`` wrote into an output directory: its own record of its files.

``emit`` writes and deletes only files it made. After writing, it records each file's name
and content hash, with the plan they carry, in ``MANIFEST`` beside them (a name without a
``.yaml``/``.json`` suffix, so ``kubectl apply -f DIR`` passes it by). The next ``emit`` into
the directory reads it first:

- a file the manifest lists, unchanged, is emit's own: rewritten for the same plan, and for
  another plan replaced or deleted with ``--replace`` (refused without it);
- a file it does not list (an operator's hand-written ``service.yaml``, a
  ``profile.notes.yaml``), or one edited since emit wrote it, is the operator's: never written
  over or deleted, ``--replace`` or not.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from launcher import bounded
from launcher.owned import read as owned_read
from launcher.owned import write as owned_write

MANIFEST = "b12x-launch-emit.manifest"
SCHEMA = "b12x-launch/emit-manifest/1"
MANIFEST_MAX = 1 << 20
FILE_MAX = 16 << 20
"""Larger than any file emit writes: a listed file grown past it is not emit's any more."""


def digest(text: str | bytes) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Manifest:
    fingerprint: str = ""
    """The plan the listed files carry ("" when there is no manifest)."""
    files: dict[str, str] = field(default_factory=dict)
    """File name -> sha256 of the content emit wrote."""


def read(out_dir: Path) -> Manifest:
    """The directory's manifest; an empty one when there is none or it is not emit's (then no
    file there counts as emit's own)."""
    try:
        raw = owned_read.read_bytes(out_dir / MANIFEST, MANIFEST_MAX, "emit manifest")
        data = bounded.parse_json(raw)
    except (OSError, ValueError):
        return Manifest()
    if not isinstance(data, dict):  # JSON, but not emit's record (a list, a number)
        return Manifest()
    files = data.get("files")
    if data.get("schema") != SCHEMA or not isinstance(files, dict):
        return Manifest()
    names = {
        str(k): str(v)
        for k, v in files.items()
        if isinstance(k, str) and isinstance(v, str) and _plain_name(k)
    }
    return Manifest(str(data.get("fingerprint", "")), names)


def _plain_name(name: str) -> bool:
    """A file directly in the directory (a manifest cannot point emit anywhere else)."""
    return bool(name) and "/" not in name and "\\" not in name and name not in (".", "..")


def write(out_dir: Path, fingerprint: str, files: dict[str, str]) -> Path:
    data = {"schema": SCHEMA, "fingerprint": fingerprint, "files": dict(sorted(files.items()))}
    return owned_write.write_json(out_dir / MANIFEST, data, root=out_dir)


def own_files(out_dir: Path, manifest: Manifest) -> tuple[dict[str, str], list[str]]:
    """The manifest's files still as emit wrote them (name -> hash), and those edited since
    (or replaced by something else)."""
    own: dict[str, str] = {}
    edited: list[str] = []
    for name, sha in manifest.files.items():
        path = out_dir / name
        if not path.exists() and not path.is_symlink():
            continue
        try:
            text = (
                bounded.read_bytes(path, FILE_MAX, "emitted file") if not path.is_symlink() else b""
            )
            same = bool(text) and digest(text) == sha
        except (OSError, bounded.TooLarge):
            same = False
        if same:
            own[name] = sha
        else:
            edited.append(name)
    return own, sorted(edited)
