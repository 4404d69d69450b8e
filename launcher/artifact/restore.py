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
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from launcher.artifact import ArtifactError
from launcher.artifact.archive import Mismatch, extract, open_artifact
from launcher.artifact.manifest import ArtifactKeys, Manifest, differences
from launcher.contract.artifact import (
    JOURNAL,
    MARKERS,
    ArtifactRecord,
    Marker,
    RestoreJournal,
    marker_path,
)
from launcher.owned import Refused
from launcher.owned import paths as owned_paths
from launcher.owned import read as owned_read
from launcher.owned import remove as owned_remove
from launcher.owned import write as owned_write

LOCK = ".blaunch-restore.lock"
STAGING = ".blaunch-restore-"
JOURNAL_MAX = 64 << 20
"""A journal larger than this is not one (it lists the paths of one artifact)."""
MARKER_MAX = 1 << 20


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
            owned_write.write_json(
                marker_path(cache_root, m.artifact_id), _marker_data(record, m), root=cache_root
            )
        except (OSError, Refused) as exc:  # the journal is still there: take back what was placed
            recover(cache_root)
            raise ArtifactError(
                f"cannot record the restore in {cache_root} ({_why(exc)}); nothing "
                "was restored (the caches are as they were)"
            ) from None
        owned_remove.discard(cache_root, JOURNAL)
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
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(cache_root / LOCK, flags, 0o666)
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


def _marker_data(record: ArtifactRecord, m: Manifest) -> dict[str, object]:
    return Marker(profile=m.profile, record=record).to_json()


def _present(cache_root: Path, m: Manifest) -> bool:
    """Restored before into this cache root, and every file still there at its size."""
    if not marker_path(cache_root, m.artifact_id).is_file():
        return False
    for f in m.files:
        try:
            if os.lstat(owned_paths.inside(cache_root, f.path)).st_size != f.size:
                return False
        except (OSError, Refused):
            return False
    return True


def _stage_and_commit(reader, source: Path, cache_root: Path, m: Manifest) -> dict[str, int]:
    nothing = "nothing was restored (the caches are as they were)"
    try:
        staging = owned_write.new_scratch(cache_root, STAGING)
    except OSError as exc:
        raise ArtifactError(
            f"cannot write {cache_root} ({exc.strerror or exc}); {nothing}"
        ) from None
    try:
        for entry in m.files:  # a link below the cache root refuses it before a byte is copied
            owned_paths.inside(cache_root, entry.path)
        extract(reader, staging)
        os.sync()  # the staged bytes are on disk before any of them is linked into place
        return _commit(staging, cache_root, m)
    except Mismatch as exc:
        raise ArtifactError(
            f"{source}: {exc}: the artifact is damaged; {nothing}. Copy it again, or bake it again"
        ) from None
    except Refused as exc:
        raise ArtifactError(
            f"cannot restore into {cache_root}: {exc}; {nothing}. Make it a plain directory, or "
            "boot without --cache-from"
        ) from None
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        fix = "free space on it" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "check it"
        raise ArtifactError(
            f"cannot restore into {cache_root}: {exc.strerror or exc}{where}; {nothing}. "
            f"{fix[0].upper()}{fix[1:]}, or boot without --cache-from"
        ) from None
    finally:
        owned_write.drop_scratch(staging)


def _commit(staging: Path, cache_root: Path, m: Manifest) -> dict[str, int]:
    """Place each staged file the cache lacks; every path is resolved below the cache root
    without a link first (a link anywhere on the way refuses the restore, nothing placed)."""
    moves, present, kept = [], 0, 0
    for entry in m.files:
        dest = owned_paths.inside(cache_root, entry.path)
        if os.path.lexists(dest):
            try:
                same = owned_remove.sha256_of(dest) == (entry.sha256, entry.size)
            except (OSError, ValueError):
                same = False
            present, kept = present + same, kept + (not same)
            continue
        moves.append(entry)
    journal = RestoreJournal.model_validate(
        {
            "artifact_id": m.artifact_id,
            "files": [{"path": e.path, "sha256": e.sha256} for e in moves],
        }
    )
    owned_write.write_json(cache_root / JOURNAL, journal.to_json(), root=cache_root)
    placed: list[Path] = []
    made: list[Path] = []
    try:
        for entry in moves:
            parent = entry.path.rsplit("/", 1)[0]
            dest = owned_paths.makedirs(cache_root, parent, made) / entry.path.rsplit("/", 1)[1]
            _place(staging / entry.path, dest)
            placed.append(dest)
    except (OSError, Refused):
        owned_remove.remove_made(placed, made)
        owned_remove.discard(cache_root, JOURNAL)
        raise
    return {"restored": len(placed), "present": present, "kept": kept}


def _place(src: Path, dest: Path) -> None:
    owned_write.place(src, dest)


def _why(exc: Exception) -> str:
    return str(exc.strerror or exc) if isinstance(exc, OSError) else str(exc)


def recover(cache_root: Path) -> str | None:
    """Roll back a restore that was killed while it moved files into place (its journal is
    still there), and remove staging directories a killed restore left; a note on what was
    done, or None. Call with the cache root's restore lock held (``restore`` does).

    The journal lies on a shared volume: it is read bounded and typed, each path resolved
    below the cache root without a link, and a file removed only with the journal's sha256.
    """
    note = None
    journal = cache_root / JOURNAL
    if os.path.lexists(journal):
        try:
            data = owned_read.read_model(journal, RestoreJournal, JOURNAL_MAX, "restore journal")
        except (OSError, ValueError) as exc:
            owned_remove.discard(cache_root, JOURNAL)
            return f"an interrupted restore's journal was not read ({_why(exc)}); nothing removed"
        undone = skipped = 0
        for f in data.files:
            try:
                undone += owned_remove.remove_listed(cache_root, f.path, f.sha256)
            except Refused:
                skipped += 1  # outside the cache root or through a link: not the restore's
        owned_remove.discard(cache_root / MARKERS, f"{data.artifact_id}.json")
        owned_remove.discard(cache_root, JOURNAL)
        note = f"rolled back an interrupted restore of artifact {data.artifact_id} ({undone} files)"
        if skipped:
            note += f"; {skipped} path(s) outside the cache root or through a link left alone"
    owned_write.remove_stale_scratch(cache_root, STAGING)
    return note


def restored_in(cache_root: Path) -> list[tuple[str, ArtifactRecord]]:
    """The artifacts restored into ``cache_root`` (profile name, record), oldest first."""
    folder = cache_root / MARKERS
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json"), key=lambda p: (p.stat().st_mtime, p.name)):
        try:
            marker = owned_read.read_model(path, Marker, MARKER_MAX, "restore marker")
        except (OSError, ValueError):  # a marker of another version, a damaged one, a link
            continue
        if marker.record.artifact_id != path.stem:  # one restore's marker copied to another name
            continue
        out.append((marker.profile, marker.record))
    return out


def recover_interrupted(cache_root: Path) -> str | None:
    """``recover`` under the lock, when a killed restore left its journal or staging behind
    (one stat otherwise): every launch calls it, with or without ``--cache-from``."""
    if not cache_root.is_dir():
        return None
    if not os.path.lexists(cache_root / JOURNAL) and not any(cache_root.glob(STAGING + "*")):
        return None
    with _locked(cache_root):
        return recover(cache_root)
