"""Deleting below an owned root: only files its record lists, with the recorded bytes."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from launcher import bounded
from launcher.owned import Refused
from launcher.owned.paths import inside, open_regular, parts_of

CHUNK = 1 << 20


def sha256_of(path: Path, limit: int | None = None) -> tuple[str, int]:
    """(sha256, size) of the regular file at ``path``, opened without following a link.

    Raises:
        Refused: a link, or not a regular file.
        TooLarge: more than ``limit`` bytes.
        OSError: it cannot be read.
    """
    with open_regular(path) as fh:
        h, n = hashlib.sha256(), 0
        while chunk := fh.read(CHUNK):
            n += len(chunk)
            if limit is not None and n > limit:
                raise bounded.TooLarge(f"{path}: more than {limit:,} bytes")
            h.update(chunk)
    return h.hexdigest(), n


def remove_listed(root: Path, rel: str, sha256: str) -> bool:
    """Delete ``root / rel`` if it is a regular file (reached without a link) whose bytes
    have ``sha256``; whether it did.

    Raises:
        Refused: ``rel`` leaves the root or passes a link.
    """
    path = inside(root, rel)
    try:
        if sha256_of(path)[0] != sha256:
            return False
    except (OSError, Refused):
        return False
    os.unlink(path)
    return True


def remove_empty_dirs(dirs: Iterable[Path]) -> None:
    """Remove each directory that is empty, deepest first (one in use stays)."""
    for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            os.rmdir(d)


def remove_made(files: Iterable[Path], dirs: Iterable[Path]) -> None:
    """Take back what a writer made a moment ago (its own list of files and directories)."""
    for path in files:
        with contextlib.suppress(OSError):
            os.unlink(path)
    remove_empty_dirs(dirs)


def check_tree(root: Path, listed: Mapping[str, str]) -> None:
    """``root`` holds exactly the files ``listed`` (path -> sha256), each with those bytes,
    and directories; nothing else (no link, no special file).

    Raises:
        Refused: ``root`` is a link or no directory, or holds something else (named).
    """
    if os.path.islink(root) or not os.path.isdir(root):
        raise Refused(f"{root}: not a directory the launcher made")
    seen = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in (*dirnames, *filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            mode = os.lstat(path).st_mode
            if stat.S_ISDIR(mode):
                continue
            if rel not in listed:
                raise Refused(f"{path}: not a file the launcher made there")
            if sha256_of(path)[0] != listed[rel]:
                raise Refused(f"{path}: changed since the launcher wrote it")
            seen.add(rel)
    missing = sorted(set(listed) - seen)
    if missing:
        raise Refused(f"{root / missing[0]}: listed but missing")


def remove_tree(root: Path, listed: Mapping[str, str]) -> None:
    """Delete the tree ``root`` after ``check_tree``: its listed files, then its directories
    (each only once empty).

    Raises:
        Refused: ``root`` holds anything not listed, or changed (nothing is deleted).
    """
    check_tree(root, listed)
    dirs = [Path(root)]
    for rel in listed:
        os.unlink(inside(root, rel))
        parent = Path(root, rel).parent
        while parent != Path(root):
            dirs.append(parent)
            parent = parent.parent
    remove_empty_dirs(set(dirs))


def discard(directory: Path, name: str) -> bool:
    """Delete the launcher's own file ``name`` (a fixed name it writes: a journal, a marker,
    a probe) directly in ``directory``; a link there is removed itself, never followed, and a
    directory is left. Whether something was removed."""
    parts_of(name)
    if "/" in name:
        raise Refused(f"{name!r}: not a name directly in {directory}")
    path = Path(directory) / name
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            return False
        os.unlink(path)
    except OSError:
        return False
    return True


def remove_marked_tree(parent: Path, name: str, marker: str) -> None:
    """Delete the directory ``parent/name`` that the launcher made and marked with its file
    ``marker`` (a cache tree of another image build: what compilers wrote there has no
    record, so the marker is its owner's mark). rmtree follows no link inside it.

    Raises:
        Refused: ``name`` is a link, no directory, or holds no marker file of ours.
        OSError: it could not be removed whole.
    """
    parts_of(name)
    if "/" in name:
        raise Refused(f"{name!r}: not a name directly in {parent}")
    tree = inside(parent, name, missing_ok=False)
    if not stat.S_ISDIR(os.lstat(tree).st_mode):
        raise Refused(f"{tree}: not a directory")
    try:
        marked = stat.S_ISREG(os.lstat(tree / marker).st_mode)
    except OSError:
        marked = False
    if not marked:
        raise Refused(f"{tree}: no {marker} of the launcher's in it")
    shutil.rmtree(tree)
