"""Memory sizes as humans write them (``95.01GiB``, ``512MiB``, ``2G``) and back."""

from __future__ import annotations

import math
import re

KiB = 1024
MiB = 1024**2
GiB = 1024**3

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": KiB,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": MiB,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": GiB,
    "t": 1000**4,
    "tb": 1000**4,
    "tib": 1024**4,
}
MAX_SIZE = 1 << 60  # an exbibyte: anything larger is a typo, not a card
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*$")


def parse_size(value: int | float | str) -> int:
    """Parse a memory size into bytes.

    Integers are bytes. Strings take a decimal (``GB``, ``G``, as vLLM's
    ``--kv-cache-memory-bytes`` does) or binary (``GiB``) suffix.

    Raises:
        ValueError: the value is not a size, is negative, or is absurdly large.
    """
    if isinstance(value, bool):
        raise ValueError("expected a size such as 512MiB")
    if isinstance(value, int):
        return _bounded(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("a size must be a finite number")
        return _bounded(value)
    if not isinstance(value, str):
        raise ValueError("expected a size such as 512MiB or 95.01GiB")
    match = _SIZE.match(value)
    if not match:
        raise ValueError("expected a size such as 512MiB or 95.01GiB")
    number, unit = match.groups()
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise ValueError(f"unknown unit {unit!r}; use B, KiB, MiB, GiB, TiB or KB/MB/GB")
    amount = float(number)
    if not math.isfinite(amount):
        raise ValueError("a size must be a finite number")
    return _bounded(amount * factor)


def _bounded(value: int | float) -> int:
    if value < 0:
        raise ValueError("a size cannot be negative")
    if value > MAX_SIZE:
        raise ValueError("a size that large is not a memory size (over an exbibyte)")
    return int(value)


def format_size(n: int | float, unit: str = "auto") -> str:
    """Format bytes with a binary unit: ``format_size(1536 * MiB) == '1.50 GiB'``."""
    if unit == "auto":
        unit = (
            "GiB" if abs(n) >= GiB else "MiB" if abs(n) >= MiB else "KiB" if abs(n) >= KiB else "B"
        )
    factor = {"B": 1, "KiB": KiB, "MiB": MiB, "GiB": GiB}[unit]
    return f"{n:.0f} B" if unit == "B" else f"{n / factor:.2f} {unit}"


def table_unit(total: int) -> str:
    """The unit a table of parts of ``total`` reads best in."""
    return "GiB" if total >= 8 * GiB else "MiB"


def in_unit(n: int | float, unit: str) -> str:
    """Bytes in ``unit`` (GiB or MiB) with two decimals, no unit suffix."""
    return f"{n / (GiB if unit == 'GiB' else MiB):.2f}"
