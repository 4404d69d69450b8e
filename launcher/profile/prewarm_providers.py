"""The names of the prewarm providers: the built-in table and the third-party entry points.

The providers themselves live in the runtime room (``launcher.runtime.prewarm`` loads them,
inside vLLM); their names live here so that a profile's settings check can refuse an unknown
one without importing the runtime stage, torch, vLLM or b12x.
"""

from __future__ import annotations

ENTRY_POINT_GROUP = "b12x_launch.prewarm"
"""Where a third party registers a provider: ``name = "pkg.module:ProviderClass"``."""

BUILTIN: dict[str, str] = {
    "b12x": "launcher.runtime.prewarm.b12x:B12xProvider",
    "vllm": "launcher.runtime.prewarm.vllm_warmup:VllmWarmupProvider",
    "triton": "launcher.runtime.prewarm.triton_kernels:TritonProvider",
    "census": "launcher.runtime.prewarm.census:CensusProvider",
    "keys": "launcher.runtime.prewarm.keys:KeysProvider",
}
"""Provider name -> ``module:Class``, imported only when the provider is loaded."""


def available() -> dict[str, str]:
    """Provider name -> ``module:Class``, built-ins first, then entry points."""
    from importlib import metadata  # only when asked: a profile of built-ins never needs it

    out = dict(BUILTIN)
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        out.setdefault(ep.name, ep.value)
    return out
