"""Restore an artifact into a node's caches before vLLM starts, whole or not at all.

1. The keys: the artifact's manifest against this node's (``keys.node_keys``). A key that
   differs refuses it, naming the key; with ``--force`` the boot goes on without it, and the
   run says why.
2. Staging: every file is copied into a temporary directory inside the cache root (the same
   file system), hashed as it is copied. A file whose bytes are not the manifest's, a file
   too many or too few, a full disk: the staging directory is removed and the caches are as
   they were.
3. Commit: a journal lists the files about to appear; each is linked into place (a file the
   cache already has is never replaced: identical, it counts as present; different, the
   node's own is kept). A failure on the way unlinks what was placed. A restore killed
   midway is rolled back by the next launch on that cache root (``recover``), before
   anything reads the caches.
4. A marker (``.blaunch-artifacts/<artifact id>.json``) records it: the next start with the
   same artifact finds it present and copies nothing.

Restores into one cache root take turns (a lock file): two pods of one node may share it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from launcher import atomic
from launcher.artifact import ArtifactError
from launcher.artifact.archive import Mismatch, extract, hash_file, open_artifact
from launcher.artifact.manifest import ArtifactKeys, Manifest, differences
from launcher.contract.artifact import ArtifactRecord
from launcher.contract.base import Frozen

MARKERS = ".blaunch-artifacts"
JOURNAL = ".blaunch-restore.journal"
LOCK = ".blaunch-restore.lock"
STAGING = ".blaunch-restore-"
_NO_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP}


def restore(
    source: Path,
    cache_root: Path,
    here: ArtifactKeys,
    *,
    force: bool = False,
    ranks: Sequence[int] = (),
) -> ArtifactRecord:
    """Verify the artifact at ``source`` against ``here`` and restore it into ``cache_root``.

    ``ranks``: this node's ranks (the artifact covers the boot when it holds a measurement
    record of each). With ``force`` an artifact that does not fit, or is damaged, is ignored
    (the record's ``state``, and its ``note`` says why) instead of refused.

    Raises:
        ArtifactError: a key differs, a file is damaged, missing or extra, or the caches
            cannot be written; the caches are as they were.
    """
    started = time.monotonic()
    try:
        cache_root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ArtifactError(
            f"cannot make the cache root {cache_root} ({exc.strerror or exc}); set "
            "runtime.cache_root to a writable directory"
        ) from None
    try:
        return _restore(source, cache_root, here, force, ranks, started)
    except ArtifactError as exc:
        if not force:
            raise
        return _unread(source, started, exc)  # e.g. no manifest: nothing to name but the path


def check_manifest(source: Path) -> None:
    """Read the artifact's manifest alone (no cache touched), so that a damaged or hostile
    artifact is refused naming itself before the environment is checked (GPUs, vLLM).

    Raises:
        ArtifactError: nothing at ``source``, not an artifact, or a manifest that does not
            parse (a path outside the caches, a file that is not plain, not JSON).
    """
    with open_artifact(source):
        pass


def _restore(
    source: Path,
    cache_root: Path,
    here: ArtifactKeys,
    force: bool,
    ranks: Sequence[int],
    started: float,
) -> ArtifactRecord:
    with _locked(cache_root), open_artifact(source) as reader:
        recover(cache_root)
        m = reader.manifest
        base = _record(m, source, here, ranks)
        diffs = differences(m.keys, here)
        if diffs:
            reason = "; ".join(diffs)
            if force:
                return _done(
                    base, started, "ignored", note=f"--force: booted without it ({reason})"
                )
            raise ArtifactError(
                f"{source}: artifact {m.artifact_id} does not fit this node: {reason}. Restore an "
                "artifact baked for this deployment on cards like these (b12x-launch bake "
                "PROFILE OUT after a boot), or pass --force to boot without it"
            )
        if _present(cache_root, m):
            return _done(base, started, "present", present=m.file_count)
        try:
            counts = _stage_and_commit(reader, source, cache_root, m)
        except ArtifactError as exc:
            if force:
                return _done(base, started, "ignored", note=f"--force: booted without it ({exc})")
            raise
        record = _done(base, started, "restored", **counts)
        try:
            atomic.write_json(marker_path(cache_root, m.artifact_id), _marker_data(record, m))
        except OSError as exc:  # the journal is still there: take back what was placed
            recover(cache_root)
            raise ArtifactError(
                f"cannot record the restore in {cache_root} ({exc.strerror or exc}); nothing "
                "was restored (the caches are as they were)"
            ) from None
        (cache_root / JOURNAL).unlink(missing_ok=True)
        return record


def _unread(source: Path, started: float, exc: ArtifactError) -> ArtifactRecord:
    """The record of an artifact ``--force`` ignored before its manifest could be read."""
    return ArtifactRecord(
        state="ignored",
        artifact_id="",
        source=str(source),
        fingerprint="",
        keys=None,
        caches={},
        file_count=0,
        total_bytes=0,
        seconds=round(time.monotonic() - started, 3),
        note=f"--force: booted without it ({exc})",
    )


def _record(
    m: Manifest, source: Path, here: ArtifactKeys, ranks: Sequence[int]
) -> dict[str, object]:
    covers = m.keys.fingerprint == here.fingerprint and set(ranks) <= set(m.calibration.ranks)
    return {
        "artifact_id": m.artifact_id,
        "source": str(source),
        "fingerprint": m.keys.fingerprint,
        "keys": m.keys,
        "caches": m.caches,
        "file_count": m.file_count,
        "total_bytes": m.total_bytes,
        "calibration_ranks": tuple(m.calibration.ranks),
        "qualified": m.calibration.qualified,
        "census_entries": m.calibration.census_entries,
        "covers": covers,
    }


def _done(
    base: dict[str, object],
    started: float,
    state: str,
    *,
    note: str = "",
    restored: int = 0,
    present: int = 0,
    kept: int = 0,
) -> ArtifactRecord:
    return ArtifactRecord.model_validate(
        {
            **base,
            "state": state,
            "note": note,
            "files_restored": restored,
            "files_present": present,
            "files_kept": kept,
            "seconds": round(time.monotonic() - started, 3),
            "covers": bool(base["covers"]) and state != "ignored",
        }
    )


@contextlib.contextmanager
def _locked(cache_root: Path) -> Iterator[None]:
    try:
        fd = os.open(cache_root / LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise ArtifactError(
            f"cannot write the cache root {cache_root} ({exc.strerror or exc}); set "
            "runtime.cache_root to a writable directory"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def marker_path(cache_root: Path, artifact_id: str) -> Path:
    """Where the restore of ``artifact_id`` into ``cache_root`` leaves its marker (written
    when the restore ends)."""
    return cache_root / MARKERS / f"{artifact_id}.json"


class Marker(Frozen):
    """What a restore leaves in ``<cache_root>/.blaunch-artifacts/<id>.json``."""

    profile: str = "?"
    """The profile's name the artifact was baked for."""
    record: ArtifactRecord
    """What the restore did."""


def _marker_data(record: ArtifactRecord, m: Manifest) -> dict[str, object]:
    return Marker(profile=m.profile, record=record).to_json()


def _present(cache_root: Path, m: Manifest) -> bool:
    """Restored before into this cache root, and every file still there at its size."""
    if not marker_path(cache_root, m.artifact_id).is_file():
        return False
    for f in m.files:
        try:
            if (cache_root / f.path).stat().st_size != f.size:
                return False
        except OSError:
            return False
    return True


def _stage_and_commit(reader, source: Path, cache_root: Path, m: Manifest) -> dict[str, int]:
    nothing = "nothing was restored (the caches are as they were)"
    try:
        staging = Path(tempfile.mkdtemp(prefix=STAGING, dir=cache_root))
    except OSError as exc:
        raise ArtifactError(
            f"cannot write {cache_root} ({exc.strerror or exc}); {nothing}"
        ) from None
    try:
        extract(reader, staging)
        os.sync()  # the staged bytes are on disk before any of them is linked into place
        return _commit(staging, cache_root, m)
    except Mismatch as exc:
        raise ArtifactError(
            f"{source}: {exc}: the artifact is damaged; {nothing}. Copy it again, or bake it again"
        ) from None
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        fix = "free space on it" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "check it"
        raise ArtifactError(
            f"cannot restore into {cache_root}: {exc.strerror or exc}{where}; {nothing}. "
            f"{fix[0].upper()}{fix[1:]}, or boot without --cache-from"
        ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _commit(staging: Path, cache_root: Path, m: Manifest) -> dict[str, int]:
    moves, present, kept = [], 0, 0
    for entry in m.files:
        dest = cache_root / entry.path
        if dest.exists() or dest.is_symlink():
            same = dest.is_file() and hash_file(dest) == (entry.sha256, entry.size)
            present, kept = present + same, kept + (not same)
            continue
        moves.append(entry)
    journal = {
        "artifact_id": m.artifact_id,
        "files": [{"path": e.path, "sha256": e.sha256} for e in moves],
    }
    atomic.write_json(cache_root / JOURNAL, journal)
    placed: list[Path] = []
    made: list[Path] = []
    try:
        for entry in moves:
            dest = cache_root / entry.path
            _makedirs(dest.parent, made)
            _place(staging / entry.path, dest)
            placed.append(dest)
    except OSError:
        _undo(placed, made)
        (cache_root / JOURNAL).unlink(missing_ok=True)
        raise
    return {"restored": len(placed), "present": present, "kept": kept}


def _makedirs(directory: Path, made: list[Path]) -> None:
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for d in reversed(missing):
        d.mkdir()
        made.append(d)


def _place(src: Path, dest: Path) -> None:
    """``src``'s file at ``dest``, which must not exist: a hard link (atomic, never replaces);
    a copy renamed into place where the file system has no links."""
    try:
        os.link(src, dest)
        return
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
    tmp = dest.parent / f"{STAGING}{dest.name}.tmp"
    shutil.copy2(src, tmp)
    try:
        if dest.exists():
            raise FileExistsError(errno.EEXIST, "appeared during the restore", str(dest))
        os.rename(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def _undo(placed: list[Path], made: list[Path]) -> None:
    for path in placed:
        with contextlib.suppress(OSError):
            path.unlink()
    for directory in reversed(made):
        with contextlib.suppress(OSError):
            directory.rmdir()


def recover(cache_root: Path) -> str | None:
    """Roll back a restore that was killed while it moved files into place (its journal is
    still there), and remove staging directories a killed restore left; a note on what was
    done, or None. Call with the cache root's restore lock held (``restore`` does)."""
    note = None
    journal = cache_root / JOURNAL
    if journal.is_file():
        try:
            data = json.loads(journal.read_text())
            files = [(f["path"], f["sha256"]) for f in data["files"]]
            artifact_id = str(data["artifact_id"])
        except (OSError, ValueError, KeyError, TypeError):
            files, artifact_id = [], ""
        undone = 0
        for rel, sha in files:
            dest = cache_root / rel
            with contextlib.suppress(OSError, ValueError):
                if dest.is_file() and hash_file(dest)[0] == sha:
                    dest.unlink()
                    undone += 1
        if artifact_id:
            with contextlib.suppress(OSError):
                marker_path(cache_root, artifact_id).unlink(missing_ok=True)
        journal.unlink(missing_ok=True)
        note = (
            f"rolled back an interrupted restore of artifact {artifact_id or '?'} ({undone} files)"
        )
    for stale in cache_root.glob(STAGING + "*"):
        shutil.rmtree(stale, ignore_errors=True)
    return note


def restored_in(cache_root: Path) -> list[tuple[str, ArtifactRecord]]:
    """The artifacts restored into ``cache_root`` (profile name, record), oldest first."""
    folder = cache_root / MARKERS
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json"), key=lambda p: (p.stat().st_mtime, p.name)):
        try:
            marker = Marker.model_validate_json(path.read_text())
        except (OSError, ValueError):  # a marker of another version, or a damaged one
            continue
        out.append((marker.profile, marker.record))
    return out


def recover_interrupted(cache_root: Path) -> str | None:
    """``recover`` under the lock, when a killed restore left its journal or staging behind
    (one stat otherwise): every launch calls it, with or without ``--cache-from``."""
    if not cache_root.is_dir():
        return None
    if not (cache_root / JOURNAL).exists() and not any(cache_root.glob(STAGING + "*")):
        return None
    with _locked(cache_root):
        return recover(cache_root)
