"""The stage's one wrapper on a Triton kernel's ``run`` (``JITFunction.run``, per kernel
instance): every observer of a kernel's launches is a layer of one chain, under one restore
protocol.

A layer is a function given the ``run`` below it that returns the ``run`` to call in its
place (``parallel_compile.compile_only_run`` is one). ``observe`` puts a layer on top of the chain
and returns its ``Layered``; ``Layered.remove`` takes that layer out wherever it sits, in any
order. The chain is one instance attribute, ``run``, that calls the layers' composition of
the moment; when the last layer goes, the kernel's ``run`` is what it was before the first
(the class's method, or a wrapper someone outside the chain had put on). A wrapper someone
puts on over the chain is left on: the chain under it stays, passing straight through.
Imports no Triton: it works on any object with a ``run``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

Run = Callable[..., Any]
Layer = Callable[[Run], Run]
"""Given the ``run`` below it, the ``run`` that takes its place."""

_LOCK = threading.Lock()


class _Chain:
    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.before: Run | None = vars(fn).get("run")
        """An instance ``run`` someone outside the chain had put on (None: the class's)."""
        self.layers: list[tuple[object, Layer]] = []
        self.top: Run = self.below()

        def run(*args: Any, **kwargs: Any) -> Any:
            return self.top(*args, **kwargs)  # read at each call: layers come and go

        self.run = run
        fn.run = run

    def below(self) -> Run:
        if self.before is not None:
            return self.before
        return type(self.fn).run.__get__(self.fn)

    def compose(self) -> None:
        top = self.below()
        for _, layer in self.layers:
            top = layer(top)
        self.top = top

    def on_top(self) -> bool:
        return vars(self.fn).get("run") is self.run


_CHAINS: dict[int, _Chain] = {}
"""id(kernel) -> its chain, while it has one (kernels live as long as their modules)."""


class Layered:
    """One layer on one kernel's chain; ``remove`` takes it out (again: nothing)."""

    def __init__(self, fn: Any, token: object) -> None:
        self._fn, self._token = fn, token

    def remove(self) -> None:
        with _LOCK:
            chain = _CHAINS.get(id(self._fn))
            if chain is None or all(t is not self._token for t, _ in chain.layers):
                return
            chain.layers = [(t, layer) for t, layer in chain.layers if t is not self._token]
            chain.compose()
            if chain.layers or not chain.on_top():
                return  # layers left, or someone's wrapper over the chain: it passes through
            if chain.before is None:
                del vars(self._fn)["run"]
            else:
                self._fn.run = chain.before
            del _CHAINS[id(self._fn)]


def observe(fn: Any, layer: Layer) -> Layered:
    """Put ``layer`` on top of ``fn``'s chain (the chain goes on at the first layer)."""
    token = object()
    with _LOCK:
        chain = _CHAINS.get(id(fn))
        if chain is None or chain.fn is not fn:
            chain = _CHAINS[id(fn)] = _Chain(fn)
        chain.layers.append((token, layer))
        chain.compose()
    return Layered(fn, token)


def layers(fn: Any) -> int:
    """How many layers ``fn``'s chain holds (0: no chain on it)."""
    chain = _CHAINS.get(id(fn))
    return len(chain.layers) if chain is not None and chain.fn is fn else 0


@contextlib.contextmanager
def observing(fns: Iterable[Any], layer: Callable[[Any], Layer]) -> Iterator[None]:
    """``layer(fn)`` on each of ``fns`` while the block runs; taken out at its end."""
    held = [observe(fn, layer(fn)) for fn in fns]
    try:
        yield
    finally:
        for layered in held:
            layered.remove()
