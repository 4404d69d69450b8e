"""Every config hash vLLM computes in this process, with the factors it hashed (GPU tier only).

vLLM names the directory of its compiled pieces after ``VllmConfig.compute_hash()`` among
others, and ``cache_key_factors.json`` keeps only that digest. On 2026-12-04 every planned
warm boot used another directory than its baked boot, for a reason the digest cannot say. The
tier puts this directory first on ``PYTHONPATH`` of a boot and names a folder in
``BLAUNCH_TIER_CONFIG_HASHES``; each process appends ``{caller, digest, factors}`` to
``<pid>.jsonl`` there the first time it hashes a given set of factors, so two boots' files
show which factor of which config differs. Nothing else is changed: the digest returned is
vLLM's own.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import time

_OUT = os.environ.get("BLAUNCH_TIER_CONFIG_HASHES", "")
_SEEN: set[str] = set()


def _write(caller: str, digest: str, factors) -> None:
    if digest in _SEEN:
        return
    _SEEN.add(digest)
    line = {"caller": caller, "digest": digest, "factors": factors, "time": time.time()}
    try:
        with open(os.path.join(_OUT, f"{os.getpid()}.jsonl"), "a") as f:
            f.write(json.dumps(line, sort_keys=True, default=repr) + "\n")
    except OSError:
        pass  # a diagnostic never stops a boot


def _wrap_utils(module) -> None:
    original = module.hash_factors

    def hash_factors(items):
        digest = original(items)
        _write(sys._getframe(1).f_code.co_qualname, digest, items)
        return digest

    module.hash_factors = hash_factors


def _wrap_vllm_config(module) -> None:
    """The whole config's digest, with each part's own (the list vLLM hashes is not kept)."""
    cls = module.VllmConfig
    original = cls.compute_hash

    def compute_hash(self):
        digest = original(self)
        parts = {}
        for name in sorted(vars(self)):
            part = getattr(self, name, None)
            if hasattr(part, "compute_hash") and not isinstance(part, type):
                try:
                    parts[name] = part.compute_hash()
                except Exception as exc:
                    parts[name] = f"{type(exc).__name__}: {exc}"
        _write("VllmConfig.compute_hash", digest, parts)
        return digest

    cls.compute_hash = compute_hash


def _wrap_backend(module) -> None:
    """The files whose source goes into the directory's ``code_hash``, each time vLLM's
    backend is called (a cold trace, an AOT load's ``finalize_loading``, a retrace)."""
    cls = module.VllmBackend
    original = cls.__call__

    def __call__(self, graph, example_inputs):
        files = sorted(self.compilation_config.traced_files)
        _write(
            "VllmBackend.__call__",
            f"{self.prefix}:{hash(tuple(files))}:{len(_SEEN)}",
            {"prefix": self.prefix, "traced_files": files},
        )
        return original(self, graph, example_inputs)

    cls.__call__ = __call__


TARGETS = {
    "vllm.config.utils": _wrap_utils,
    "vllm.config.vllm": _wrap_vllm_config,
    "vllm.compilation.backends": _wrap_backend,
}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        wrap = TARGETS.get(name)
        if wrap is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            wrap(module)

        spec.loader.exec_module = exec_module
        return spec


if _OUT:
    os.makedirs(_OUT, exist_ok=True)
    sys.meta_path.insert(0, _Finder())
