"""vLLM's ``torch.compile`` cache on disk: where it lies under the cache root, and the file of
its key's factors it writes beside each compiled part.

vLLM (0.26) hashes the value of every variable of its own into that key
(``vllm.envs.compile_factors``) and writes them, under ``env``, into ``FACTORS``. The launch
(``artifact.compile_env``) and the worker (``runtime.compile_key``, ``runtime.compile_dir``)
read them; both name the layout here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from launcher.owned import read as owned_read

TORCH_COMPILE = Path("vllm") / "torch_compile_cache"
"""vLLM's compile cache under the cache root (``VLLM_CACHE_ROOT`` is its ``vllm``)."""
FACTORS = "cache_key_factors.json"
"""vLLM's file of the factors of its key, beside each compiled part."""
FACTORS_MAX = 16 << 20
"""A factor file larger than this is not vLLM's (it lists a config's factors)."""


def factor_files(cache_root: Path) -> Iterator[tuple[Path, dict]]:
    """vLLM's factor files under ``cache_root`` (one per compiled part), read; one that cannot
    be read or is no JSON object is passed over."""
    for path in sorted((cache_root / TORCH_COMPILE).glob(f"*/rank_*/*/{FACTORS}")):
        try:
            factors = owned_read.read_json(path, FACTORS_MAX, "vLLM factor file")
        except (OSError, ValueError):
            continue
        if isinstance(factors, dict):
            yield path, factors
