"""The one reader for what crosses a trust line: a journal, a marker, a record, a manifest.

Read from a regular file reached without a link (below ``root`` when given), at most
``limit`` bytes, and parsed into its type; anything else is refused by name.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from pydantic import BaseModel, ValidationError

from launcher.bounded import TooLarge, parse_json
from launcher.owned import Refused
from launcher.owned.paths import inside

M = TypeVar("M", bound=BaseModel)
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def open_regular(path: Path, why: str = "") -> BinaryIO:
    """The regular file at ``path`` opened for reading, no link followed and no FIFO waited on.

    Raises:
        OSError: it cannot be opened (missing, no permission).
        Refused: a link, a FIFO, a device or a directory (``why`` ends the message).
    """
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if os.path.islink(path):
            raise Refused(f"{path}: a symbolic link{why}") from None
        raise exc
    fh = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
        fh.close()
        raise Refused(f"{path}: not a regular file{why}")
    return fh


def read_bytes(path: Path, limit: int, what: str, *, root: Path | None = None) -> bytes:
    """The bytes of the regular file ``path`` (not a link; below ``root`` without a link),
    at most ``limit`` of them, read no further than that.

    Raises:
        OSError: it cannot be opened (missing, no permission).
        Refused: a link, a FIFO, a device, a directory, or outside ``root``.
        TooLarge: more than ``limit`` bytes.
    """
    if root is not None:
        path = inside(root, Path(path).relative_to(root).as_posix())
    with open_regular(path, f", not a {what}") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"{path}: more than a {what} has ({limit:,} bytes)")
    return data


def read_model(path: Path, model: type[M], limit: int, what: str, *, root: Path | None = None) -> M:
    """``read_bytes`` parsed as JSON into ``model``.

    Raises:
        OSError: it cannot be opened.
        ValueError: refused, too large, or not a ``model`` (``Refused``, ``TooLarge`` and
            pydantic's ``ValidationError`` are all ``ValueError``).
    """
    data = read_bytes(path, limit, what, root=root)
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        raise ValueError(f"{path}: not a {what} ({exc.error_count()} problem(s))") from None
    except RecursionError:
        raise ValueError(f"{path}: not a {what} (nested too deeply)") from None


def read_json(path: Path, limit: int, what: str) -> Any:
    """``read_bytes`` parsed as JSON (any value: the caller checks its shape).

    Raises:
        OSError: it cannot be opened.
        ValueError: refused, too large, or not JSON.
    """
    return parse_json(read_bytes(Path(path), limit, what))
