"""Reading a file the launcher did not write: a regular file, of a bounded size.

Profiles and their parents, a checkpoint's ``config.json``, records in the calibration store,
a run's plan and logs are all input. A path may name a FIFO, a device (``/dev/zero`` never
ends), a directory or a file of many gigabytes; each reader says how much it takes, and a file
that is not a plain file of at most that size is refused by name before it is read.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any, BinaryIO

KiB = 1024
MiB = 1024 * KiB


class TooLarge(ValueError):
    """Not a regular file, or larger than its reader takes (names the file)."""


def open_regular(path: str | os.PathLike, what: str) -> BinaryIO:
    """``path`` opened for reading if it is a regular file (``size`` is then known).

    Raises:
        OSError: it cannot be opened (missing, no permission, a directory).
        TooLarge: a FIFO, a device or a socket.
    """
    # O_NONBLOCK: opening a FIFO with no writer would wait for one; the check below refuses it.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    fh = os.fdopen(fd, "rb")
    try:
        info = os.fstat(fh.fileno())
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(21, "is a directory", str(path))
        if not stat.S_ISREG(info.st_mode):
            raise TooLarge(f"{path}: not a regular file (a device, FIFO or socket), not a {what}")
    except BaseException:
        fh.close()
        raise
    return fh


def read_bytes(path: str | os.PathLike, limit: int, what: str) -> bytes:
    """The whole of ``path`` if it is a regular file of at most ``limit`` bytes.

    Raises:
        OSError: it cannot be opened (missing, no permission, a directory).
        TooLarge: a FIFO, a device or a socket, or more than ``limit`` bytes.
    """
    with open_regular(path, what) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise TooLarge(f"{path}: {size:,} bytes, more than a {what} has ({_size(limit)})")
        data = fh.read(limit + 1)  # a file growing while it is read
    if len(data) > limit:
        raise TooLarge(f"{path}: more than a {what} has ({_size(limit)})")
    return data


def read_text(path: str | os.PathLike, limit: int, what: str) -> str:
    """``read_bytes`` decoded as UTF-8 (``UnicodeDecodeError``, a ``ValueError``, if not)."""
    return read_bytes(path, limit, what).decode("utf-8")


def read_tail(path: str | os.PathLike, limit: int, what: str) -> bytes:
    """The last ``limit`` bytes of a regular file (a log may be larger than what is read).

    Raises:
        OSError: it cannot be opened.
        TooLarge: not a regular file.
    """
    with open_regular(path, what) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            fh.seek(size - limit)
        return fh.read(limit)


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n // KiB} KiB"


def parse_json(text: str | bytes) -> Any:
    """``json.loads`` whose every failure is a ``ValueError`` (a document nested deeper than
    Python's recursion limit raises ``RecursionError`` in the standard parser)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def read_json(path: str | os.PathLike, limit: int, what: str) -> Any:
    """``read_text`` parsed as JSON; ``ValueError`` (``TooLarge`` among them) when it is not."""
    return parse_json(read_text(path, limit, what))
