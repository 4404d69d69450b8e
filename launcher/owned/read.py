"""The one reader for what crosses a trust line: a journal, a marker, a record, a manifest.

Read from a regular file reached without a link (below ``root`` when given), at most
``limit`` bytes, and parsed into its type; anything else is refused by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from launcher.bounded import TooLarge, parse_json
from launcher.owned.paths import inside, open_regular

M = TypeVar("M", bound=BaseModel)


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
