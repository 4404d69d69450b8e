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
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*$")


def parse_size(value: int | float | str) -> int:
    """Parse a memory size into bytes.

    Integers are bytes. Strings take a decimal (``GB``, ``G``, as vLLM's
    ``--kv-cache-memory-bytes`` does) or binary (``GiB``) suffix.

    Raises:
        ValueError: the value is not a size, or is negative.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a size such as 512MiB, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"a size cannot be negative (got {value})")
        return value
    if isinstance(value, float):
        if value < 0 or not math.isfinite(value):
            raise ValueError(f"a size must be a finite non-negative number (got {value})")
        return int(value)
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError(f"expected a size such as 512MiB or 95.01GiB, got {value!r}")
    number, unit = match.groups()
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise ValueError(
            f"unknown unit {unit!r} in {value!r}; use B, KiB, MiB, GiB, TiB or KB/MB/GB"
        )
    return int(float(number) * factor)


def format_size(n: int | float, unit: str = "auto") -> str:
    """Format bytes with a binary unit: ``format_size(1536 * MiB) == '1.50 GiB'``."""
    if unit == "auto":
        unit = (
            "GiB" if abs(n) >= GiB else "MiB" if abs(n) >= MiB else "KiB" if abs(n) >= KiB else "B"
        )
    factor = {"B": 1, "KiB": KiB, "MiB": MiB, "GiB": GiB}[unit]
    return f"{n:.0f} B" if unit == "B" else f"{n / factor:.2f} {unit}"


def gib(n: int | float) -> str:
    """Bytes as GiB with two decimals, no unit (for tables whose header names the unit)."""
    return f"{n / GiB:.2f}"


def table_unit(total: int) -> str:
    """The unit a table of parts of ``total`` reads best in."""
    return "GiB" if total >= 8 * GiB else "MiB"


def in_unit(n: int | float, unit: str) -> str:
    """Bytes in ``unit`` (GiB or MiB) with two decimals, no unit suffix."""
    return f"{n / (GiB if unit == 'GiB' else MiB):.2f}"
