"""Writing below an owned root: whole files or none, and copies that stop at their limit."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

from launcher.bounded import TooLarge
from launcher.owned import Refused
from launcher.owned.paths import inside, is_link, makedirs

CHUNK = 1 << 20
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_NO_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _target(path: Path, root: Path | None) -> Path:
    if root is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path
    Path(root).mkdir(parents=True, exist_ok=True)  # the root is the operator's choice
    target = inside(root, Path(path).relative_to(root).as_posix())
    if len(target.relative_to(root).parts) > 1:
        makedirs(root, target.parent.relative_to(root).as_posix())
    return target


def write_bytes(path: str | os.PathLike, data: bytes, *, root: Path | None = None) -> Path:
    """Write ``data`` to ``path`` atomically (readers see the old file or the new one). With
    ``root``, ``path`` lies below it, reached without a link.

    Raises:
        Refused: ``path`` leaves ``root`` or passes a link.
        OSError: the write failed (nothing half-written stays).
    """
    path = _target(Path(path), root)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file 0600; a plan, a record or a plot is for the group to read,
        # as a file opened the usual way would be (0666 less the umask).
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)  # replaces a link at ``path`` itself, never its target
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text(path: str | os.PathLike, text: str, *, root: Path | None = None) -> Path:
    return write_bytes(path, text.encode("utf-8"), root=root)


def write_json(path: str | os.PathLike, data: Any, *, root: Path | None = None) -> Path:
    return write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n", root=root)


def copy_limited(
    src: BinaryIO, dest: Path, limit: int, mode: int = 0o644, mtime_ns: int | None = None
) -> tuple[str, int]:
    """Copy ``src`` into the new file ``dest`` (never an existing one, never through a link):
    (sha256, size). It stops as soon as more than ``limit`` bytes came, before writing them.
    ``mtime_ns``: the modification time ``dest`` is given (None: the time of the copy).

    Raises:
        TooLarge: ``src`` holds more than ``limit`` bytes (``dest`` is removed).
        OSError: the write failed (``dest`` is removed).
    """
    h, n = hashlib.sha256(), 0
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := src.read(min(CHUNK, limit + 1 - n)):
                n += len(chunk)
                if n > limit:
                    raise TooLarge(f"{dest.name}: more than {limit:,} bytes")
                h.update(chunk)
                out.write(chunk)
            out.flush()
            os.fchmod(out.fileno(), mode)
            if mtime_ns is not None:
                os.utime(out.fileno(), ns=(mtime_ns, mtime_ns))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(dest)
        raise
    return h.hexdigest(), n


def place(src: Path, dest: Path) -> None:
    """``src``'s file at ``dest``, which must not exist: a hard link (atomic, never replaces);
    a copy renamed into place where the file system has no links.

    Raises:
        FileExistsError: ``dest`` exists (a link there included).
    """
    try:
        os.link(src, dest)  # a link at ``dest`` makes this fail: never replaced
        return
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
    tmp = dest.parent / f".blaunch-place-{dest.name}.tmp"
    with open(src, "rb") as fh:
        st = os.fstat(fh.fileno())  # a copy keeps the link's times: ninja reads them
        copy_limited(fh, tmp, st.st_size, stat.S_IMODE(st.st_mode), st.st_mtime_ns)
    try:
        if os.path.lexists(dest):
            raise FileExistsError(errno.EEXIST, "appeared meanwhile", str(dest))
        os.rename(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def move_new(src: Path, dest: Path) -> None:
    """Rename ``src`` (a file or tree the launcher just made) to ``dest``, which must not exist.

    Raises:
        FileExistsError: something is at ``dest``.
    """
    if os.path.lexists(dest):
        raise FileExistsError(errno.EEXIST, "exists", str(dest))
    os.rename(src, dest)


def replace_file(src: Path, dest: Path) -> None:
    """Rename the file ``src`` over ``dest``, a file the caller proved the launcher made."""
    if is_link(dest) or os.path.isdir(dest):
        raise Refused(f"{dest}: not a plain file")
    os.replace(src, dest)


def new_scratch(parent: Path, prefix: str) -> Path:
    """A new directory in ``parent`` (the same file system as what it stages), for
    ``drop_scratch``.

    Raises:
        OSError: ``parent`` cannot be written.
    """
    return Path(tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=parent))


def drop_scratch(tmp: Path) -> None:
    """Remove a directory ``new_scratch`` made, with what the writer staged in it (rmtree
    follows no link below it)."""
    shutil.rmtree(tmp, ignore_errors=True)


def remove_stale_scratch(root: Path, prefix: str) -> int:
    """Remove the scratch directories (``prefix*``) a killed writer left directly in ``root``:
    real directories only (a link of that name is left alone); how many."""
    removed = 0
    for child in root.glob(prefix + "*"):
        try:
            mode = os.lstat(child).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode):  # rmtree follows no link below it
            shutil.rmtree(child, ignore_errors=True)
            removed += 1
    return removed


def probe_writable(directory: Path) -> None:
    """Prove ``directory`` takes a file (mkdir alone passes on a read-only mount): a probe of
    its own name, removed at once.

    Raises:
        OSError: it does not.
    """
    fd, probe = tempfile.mkstemp(prefix=".writable.", dir=directory)
    os.close(fd)
    os.unlink(probe)
