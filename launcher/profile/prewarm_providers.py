"""The names of the prewarm providers: the built-in table and the third-party entry points.

The providers themselves live in the runtime room (``launcher.runtime.prewarm`` loads them,
inside vLLM); their names live here so that a profile's settings check can refuse an unknown
one without importing the runtime stage, torch, vLLM or b12x.
"""

from __future__ import annotations

ENTRY_POINT_GROUP = "b12x_launch.prewarm"
"""Where a third party registers a provider: ``name = "pkg.module:ProviderClass"``."""

BUILTIN: dict[str, str] = {
    "b12x": "launcher.runtime.prewarm.providers.b12x:B12xProvider",
    "vllm": "launcher.runtime.prewarm.providers.vllm_warmup:VllmWarmupProvider",
    "triton": "launcher.runtime.prewarm.providers.triton_kernels:TritonProvider",
    "census": "launcher.runtime.prewarm.providers.census:CensusProvider",
    "keys": "launcher.runtime.prewarm.providers.keys:KeysProvider",
}
"""Provider name -> ``module:Class``, imported only when the provider is loaded."""


def available() -> dict[str, str]:
    """Provider name -> ``module:Class``, built-ins first, then entry points."""
    from importlib import metadata  # only when asked: a profile of built-ins never needs it

    out = dict(BUILTIN)
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        out.setdefault(ep.name, ep.value)
    return out


def load_problem(target: str) -> str | None:
    """Why ``module:Class`` cannot be loaded as a provider (None: it can). Imports the module,
    as loading the provider does: for ``prewarm``, which runs the providers, not for a dry run.
    A profile names code to import here, as ``vllm.command`` names a program to run."""
    import importlib

    module, _, attr = target.partition(":")
    if not module or not attr or not all(p.isidentifier() for p in (*module.split("."), attr)):
        return f"{target!r} is not package.module:Class"
    try:
        found = getattr(importlib.import_module(module), attr, None)
    except Exception as exc:  # any import failure of a third party's module is the profile's
        return f"cannot import {module}: {type(exc).__name__}: {str(exc)[:200]}"
    if not isinstance(found, type):
        return f"{module}.{attr} is not a class (a provider is a class the workers instantiate)"
    return None
