"""Read vLLM's own KV-cache lines from its log (both the one-line and two-line formats)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# vLLM 0.33: "GPU KV cache size: 646,400 tokens, Maximum concurrency for 524,288 tokens per
# request: 1.23x"; older builds print the two parts on two lines. The CPU backend says "CPU".
_SIZE = re.compile(r"(?:GPU|CPU|XPU|TPU)?\s*KV cache size:\s*([\d,]+)\s*tokens")
_CONCURRENCY = re.compile(
    r"Maximum concurrency for\s*([\d,]+)\s*tokens per request:\s*([\d.]+)\s*x"
)
_AVAILABLE = re.compile(r"Available KV cache memory:\s*([\d.]+)\s*GiB")


@dataclass(frozen=True)
class KvLog:
    tokens: int | None = None
    max_model_len: int | None = None
    concurrency: float | None = None
    available_gib: list[float] | None = None
    """One figure per worker line seen."""


def parse_kv_lines(text: str) -> KvLog:
    """The last KV size, concurrency and every available-memory figure in ``text``."""
    sizes = _SIZE.findall(text)
    conc = _CONCURRENCY.findall(text)
    avail = [float(x) for x in _AVAILABLE.findall(text)]
    return KvLog(
        tokens=int(sizes[-1].replace(",", "")) if sizes else None,
        max_model_len=int(conc[-1][0].replace(",", "")) if conc else None,
        concurrency=float(conc[-1][1]) if conc else None,
        available_gib=avail or None,
    )
