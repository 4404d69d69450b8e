"""A Triton key in JSON's shapes and back: what a record keeps of a held key, for a warm boot
to replay equal (``keys.held_keys``, ``keys.replay``).

Triton keys a launch by a specialization list of ``(type, value)`` entries. JSON carries most
values as they are; two kinds it cannot are tagged: a constexpr that is a Triton dtype (vLLM's
fused-MoE kernel takes ``compute_type=tl.bfloat16``) and one that is not a finite number (a fill
value of ``-inf``). Anything else has no JSON form: ``TypeError``, and the key is left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

DTYPE_TAG = "tl.dtype"
FLOAT_TAG = "float"


def spec_to_json(spec: Sequence[Any]) -> list[Any]:
    """A specialization list as JSON values; TypeError: a value has no JSON form."""
    return [[_to_json(v) for v in e] if isinstance(e, tuple) else _to_json(e) for e in spec]


def spec_from_json(spec: Sequence[Any]) -> tuple[Any, ...]:
    """The specialization ``spec_to_json`` wrote, as Triton keys it (tuples, real dtypes)."""
    return tuple(tuple(map(_from_json, e)) if isinstance(e, list) else _from_json(e) for e in spec)


def _to_json(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return {FLOAT_TAG: repr(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    kind = type(value)
    if kind.__module__.startswith("triton.language") and kind.__name__ == "dtype":
        return {DTYPE_TAG: value.name}
    raise TypeError(f"{kind.__module__}.{kind.__qualname__} has no JSON form")


def _from_json(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {FLOAT_TAG}:
        return float(value[FLOAT_TAG])
    if isinstance(value, dict) and set(value) == {DTYPE_TAG}:
        import triton.language as tl

        return tl.dtype(value[DTYPE_TAG])
    return value
