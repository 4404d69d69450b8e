"""What ``emit`` wrote into an output directory: its own record of its files.

``emit`` writes and deletes only files it made. After writing, it records each file's name
and content hash, with the plan they carry, in ``MANIFEST`` beside them (a name without a
``.yaml``/``.json`` suffix, so ``kubectl apply -f DIR`` passes it by; its type is
``launcher.contract.emit_manifest``). The next ``emit`` into the directory reads it first (a
damaged one refuses the emit, naming it):

- a file the manifest lists, unchanged, is emit's own: rewritten for the same plan, and for
  another plan replaced or deleted with ``--replace`` (refused without it);
- a file it does not list (an operator's hand-written ``service.yaml``, a
  ``profile.notes.yaml``), or one edited since emit wrote it, is the operator's: never written
  over or deleted, ``--replace`` or not.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from launcher import bounded
from launcher.contract.base import read_model
from launcher.contract.emit_manifest import FIX, MANIFEST, MANIFEST_MAX, EmitManifest
from launcher.owned import write as owned_write

FILE_MAX = 16 << 20
"""Larger than any file emit writes: a listed file grown past it is not emit's any more."""


def digest(text: str | bytes) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def read(out_dir: Path) -> EmitManifest:
    """The directory's manifest; an empty one when there is none (then no file there counts
    as emit's own).

    Raises:
        ContractError: it is damaged, of another layout, not a regular file, or lists a name
            outside the directory (one line naming it: emit cannot tell its own files there).
    """
    path = out_dir / MANIFEST
    if not os.path.lexists(path):
        return EmitManifest()
    return read_model(path, EmitManifest, "emit manifest", limit=MANIFEST_MAX, fix=FIX)


def write(out_dir: Path, fingerprint: str, files: dict[str, str]) -> Path:
    data = EmitManifest(fingerprint=fingerprint, files=dict(sorted(files.items())))
    return owned_write.write_json(out_dir / MANIFEST, data.to_json(), root=out_dir)


def own_files(out_dir: Path, manifest: EmitManifest) -> tuple[dict[str, str], list[str]]:
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
