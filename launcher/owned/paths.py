"""Paths below an owned root, resolved without following links."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from launcher.owned import Refused


def parts_of(rel: str | PurePosixPath) -> tuple[str, ...]:
    """The components of a relative POSIX path that stays below its root.

    Raises:
        Refused: absolute, empty, or with ``..``, ``.``, an empty component or a NUL.
    """
    text = str(rel)
    p = PurePosixPath(text)
    if (
        not text
        or "\x00" in text
        or p.is_absolute()
        or any(part in ("", ".", "..") for part in text.split("/"))
    ):
        raise Refused(f"{text!r}: not a relative path below its root")
    return p.parts


def inside(root: Path, rel: str | PurePosixPath, *, missing_ok: bool = True) -> Path:
    """``root / rel``, each component below ``root`` that exists a real directory (the last a
    file or absent), none of them a link.

    Raises:
        Refused: ``rel`` leaves the root, or a component is a link or not a directory.
    """
    parts = parts_of(rel)
    here = Path(root)
    for i, part in enumerate(parts):
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            if not missing_ok:
                raise Refused(f"{here}: does not exist") from None
            return Path(root).joinpath(*parts)  # below a missing directory, nothing exists
        except OSError as exc:  # the root itself is no directory (/dev/null), a name too long
            raise Refused(f"{here}: {exc.strerror or exc}") from None
        if stat.S_ISLNK(mode):
            raise Refused(f"{here}: a symbolic link below {root}; nothing there is followed")
        if i < len(parts) - 1 and not stat.S_ISDIR(mode):
            raise Refused(f"{here}: not a directory, yet {'/'.join(parts)} lies below it")
    return here


def makedirs(root: Path, rel: str | PurePosixPath, made: list[Path] | None = None) -> Path:
    """The directory ``root / rel``, created component by component, none of them a link;
    each directory made is appended to ``made``.

    Raises:
        Refused: a component is a link or not a directory.
        OSError: a directory cannot be made.
    """
    here = Path(root)
    for part in parts_of(rel):
        here = here / part
        try:
            os.mkdir(here)
            if made is not None:
                made.append(here)
            continue
        except FileExistsError:
            pass
        mode = os.lstat(here).st_mode
        if stat.S_ISLNK(mode):
            raise Refused(f"{here}: a symbolic link below {root}; nothing there is followed")
        if not stat.S_ISDIR(mode):
            raise Refused(f"{here}: not a directory")
    return here


def is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


READ_FLAGS = (
    os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)
"""Open for reading: no link followed, no FIFO waited on."""


def open_regular(path: Path, why: str = "") -> BinaryIO:
    """The regular file at ``path`` opened for reading, no link followed and no FIFO waited on.

    Raises:
        OSError: it cannot be opened (missing, no permission).
        Refused: a link, a FIFO, a device or a directory (``why`` ends the message).
    """
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError as exc:
        if os.path.islink(path):
            raise Refused(f"{path}: a symbolic link{why}") from None
        raise exc
    fh = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
        fh.close()
        raise Refused(f"{path}: not a regular file{why}")
    return fh
