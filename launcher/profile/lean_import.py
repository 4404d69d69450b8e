"""Import pydantic without asyncio: about a sixth of every dry run on Python < 3.13.

pydantic and pydantic-core decorate functions with ``typing_extensions.deprecated``, whose
implementation before Python 3.13 runs ``import asyncio.coroutines`` only to ask whether the
decorated function is a coroutine function. Importing asyncio imports ssl, socket,
concurrent.futures, logging and subprocess (60 to 90 ms on the project's CPU machine), for a
dry run that never runs an event loop. While pydantic and the names the profile stage uses
are imported, a stand-in ``asyncio.coroutines`` answers that one question as asyncio would;
it is removed right after, so the next ``import asyncio`` anywhere gets the real module, and
a module that kept a reference to the stand-in gets the real one instead. If the stand-in is
ever not enough (a version that asks asyncio something else), pydantic is imported again
with the real asyncio.
"""

from __future__ import annotations

import inspect
import sys
import types


def import_pydantic() -> None:
    """Import pydantic (and load the names the profile stage uses) without asyncio."""
    if sys.version_info >= (3, 13) or "pydantic_core" in sys.modules or "asyncio" in sys.modules:
        return  # 3.13's warnings.deprecated needs no asyncio; or it is too late to matter
    marker = object()
    coroutines = types.ModuleType("asyncio.coroutines")
    coroutines.__dict__.update(
        _is_coroutine=marker,
        iscoroutinefunction=lambda func: (
            inspect.iscoroutinefunction(func) or getattr(func, "_is_coroutine", None) is marker
        ),
    )
    package = types.ModuleType("asyncio")
    package.__path__ = []
    package.coroutines = coroutines  # type: ignore[attr-defined]
    stand_ins = {"asyncio": package, "asyncio.coroutines": coroutines}
    before = set(sys.modules)
    sys.modules.update(stand_ins)
    try:
        _import()
    except Exception:  # imported again below with the real asyncio (which raises if it fails)
        for name in [
            n for n in sys.modules if n.partition(".")[0] in ("pydantic", "pydantic_core")
        ]:
            del sys.modules[name]
    finally:
        for name, module in stand_ins.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]
        new = [m for n, m in list(sys.modules.items()) if n not in before]
        _replace_references(new, set(map(id, stand_ins.values())))
    _import()


def _import() -> None:
    # pydantic loads these lazily, each on first use: load them while the stand-in is there.
    from pydantic import (  # noqa: F401
        BaseModel,
        BeforeValidator,
        ConfigDict,
        Field,
        ValidationError,
        WithJsonSchema,
    )


def _replace_references(modules: list[types.ModuleType], stand_ins: set[int]) -> None:
    """A module that bound the stand-in while it was in place gets the real asyncio."""
    for module in modules:
        for name, value in list(getattr(module, "__dict__", {}).items()):
            if id(value) in stand_ins:
                import asyncio.coroutines

                real = asyncio if value.__name__ == "asyncio" else asyncio.coroutines
                setattr(module, name, real)


import_pydantic()
