"""The compile caches under the cache root, as every process names them.

The launch points each compiler's cache variable at its directory under
``runtime.cache_root`` (``CACHE_DIRS``), an artifact holds paths below those directories and
the calibration store (``CachePath``), and a worker lists what the caches hold when its stage
ends (``CacheBaseline``, ``cache-baseline-rank<N>.json`` in the run directory): a file that
appears after that is a compile after the stage.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator

from launcher.contract.base import Frozen
from launcher.contract.store_layout import CALIBRATION

CACHE_DIRS = {
    "TRITON_CACHE_DIR": "triton",
    "VLLM_CACHE_ROOT": "vllm",
    "B12X_COMPILE_CACHE_DIR": "b12x",
    "CUTE_DSL_CACHE_DIR": "cute-dsl",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "FLASHINFER_WORKSPACE_BASE": "flashinfer",
    "XDG_CACHE_HOME": "xdg",
}
"""Each compiler's cache variable and its directory under the cache root."""

TOPS = (*sorted(set(CACHE_DIRS.values())), CALIBRATION)
"""The first component of every path an artifact holds or a restore places: one of the
compile caches or the calibration store."""


def _below_a_cache(value: str) -> str:
    p = PurePosixPath(value)
    if (
        not value
        or p.is_absolute()
        or str(p) != value
        or any(part in ("", ".", "..") for part in value.split("/"))
        or "\\" in value
        or "\x00" in value
    ):
        raise ValueError(f"not a relative path inside the cache root: {value!r}")
    if p.parts[0] not in TOPS or len(p.parts) < 2:
        raise ValueError(f"{value!r} is under none of the caches ({', '.join(TOPS)})")
    return value


CachePath = Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_below_a_cache)]
"""A file's path below the cache root (POSIX, relative, no ``.``/``..`` component; the first
component one of ``TOPS``): a file written from a manifest or a journal can go nowhere else."""

BASELINE_SCHEMA = "b12x-launch/cache-baseline/1"


class CacheBaseline(Frozen):
    """``cache-baseline-rank<N>.json``: what one rank's compile caches held when its stage
    ended. A file without ``schema`` (written before the key was) has this layout."""

    schema_id: Literal["b12x-launch/cache-baseline/1"] = Field(BASELINE_SCHEMA, alias="schema")
    """This layout's name and version (``schema``)."""
    dirs: dict[str, str] = Field(default_factory=dict)
    """Each cache variable the worker had set (a key of ``CACHE_DIRS``) and its directory."""
    files: list[str] = Field(default_factory=list)
    """Every file the caches held then, as ``VARIABLE/relative/path``, sorted."""

    @field_validator("dirs")
    @classmethod
    def _known_variables(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - set(CACHE_DIRS))
        if unknown:
            raise ValueError(f"not a compile cache's variable: {', '.join(unknown)}")
        return value

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)
