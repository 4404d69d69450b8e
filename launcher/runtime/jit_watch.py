"""Late-JIT watchdog for Triton: see (or refuse) a compile after the KV cache is sized.

Triton calls ``triton.knobs.runtime.jit_cache_hook`` whenever a ``@triton.jit``
function meets a specialization it has not compiled in this process (the on-disk
cache may still spare the compiler, but a new module is loaded), before it compiles,
and ``jit_post_compile_hook`` after (Triton 3.4 to 3.7; older releases have the same
hooks as ``JITFunction.cache_hook`` / ``compiled_hook``). Each slot holds one hook:
this module chains to whatever was installed before it and restores it on uninstall.

    before = loaded()          # hook-free: what the process holds, per kernel
    ...prewarm (count what each step brought in with ``new_since(before)``), size...
    watch.arm(on_compile=log, strict=args.strict_jit)
    ...serve: a compile now calls ``log(event)``; under strict it raises LateCompileError

The hooks go in only when the watchdog is armed, after vLLM's own warmup (where vLLM's
``--jit-monitor-mode`` puts its post-compile hook too); before sizing the worker counts
compiles by reading Triton's in-process kernel caches (``loaded``), which changes nothing
Triton does.

Import-light: triton is imported only by ``install`` and ``loaded``.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


class LateCompileError(RuntimeError):
    """A kernel specialization was compiled after the watchdog was armed."""

    def __init__(self, event: CompileEvent):
        super().__init__(f"late JIT compile after sizing: {event.describe()}")
        self.event = event


@dataclass
class CompileEvent:
    kernel: str
    """``module.qualname`` of the ``@triton.jit`` function."""
    constexprs: dict[str, Any]
    """Constexpr argument name -> value of this specialization."""
    key: str
    """Triton's in-process cache key (argument types, alignment and constexprs, options)."""
    signature: str = ""
    """Triton's readable form: name, launch options and argument types."""
    specialization: str = ""
    """Triton's own serialized specialization (``JITFunction.preload`` replays it)."""
    device: int | None = None
    warmup: bool = False
    late: bool = False
    """Compiled while the watchdog was armed."""
    started: float = field(default_factory=time.monotonic)
    thread: int = field(default_factory=threading.get_ident)
    """The thread Triton compiled on (its pre-compile hook's)."""
    seconds: float | None = None
    """Compile time, filled in by the post-compile hook."""
    kind: str = "triton"
    """``triton`` (a ``@triton.jit`` kernel, through both hooks) or ``inductor`` (a kernel
    ``torch.compile`` generated: Triton's post-compile hook alone, which Inductor calls under
    ``TORCHINDUCTOR_RUN_JIT_POST_COMPILE_HOOK=1``)."""

    @property
    def detail(self) -> str:
        consts = ", ".join(f"{k}={v}" for k, v in self.constexprs.items())
        return f"[{consts}]" if consts else self.key

    def describe(self) -> str:
        return f"{self.kernel}{self.detail}"


def _runtime_slots() -> tuple[Any, str, str]:
    """The object holding Triton's compile hooks and the two attribute names."""
    import triton

    knobs = getattr(triton, "knobs", None)
    runtime = getattr(knobs, "runtime", None)
    if runtime is not None and hasattr(runtime, "jit_cache_hook"):
        return runtime, "jit_cache_hook", "jit_post_compile_hook"
    from triton.runtime.jit import JITFunction

    return JITFunction, "cache_hook", "compiled_hook"


def _constexprs(fn: Any, constants: Any) -> dict[str, Any]:
    names = list(getattr(getattr(fn, "jit_function", None), "arg_names", []) or [])
    out: dict[str, Any] = {}
    for path, value in dict(constants or {}).items():
        idx = path[0] if isinstance(path, tuple) and path else path
        name = names[idx] if isinstance(idx, int) and idx < len(names) else str(path)
        out[name] = getattr(value, "value", value)
    return out


class JitWatch:
    """Counts Triton compiles; once armed, reports them as late (and may refuse them).

    ``slots`` replaces Triton's hook holder ``(obj, pre_attr, post_attr)``: tests pass a
    plain object to exercise the logic without Triton.
    """

    def __init__(self, slots: tuple[Any, str, str] | None = None):
        self._slots = slots
        self._prev: tuple[Any, Any] | None = None
        self._lock = threading.Lock()
        self.events: list[CompileEvent] = []
        self.armed = False
        self.strict = False
        self.on_compile: Callable[[CompileEvent], None] | None = None
        self._pending: dict[str, CompileEvent] = {}

    @property
    def installed(self) -> bool:
        return self._prev is not None

    @property
    def count(self) -> int:
        """Compiles seen since ``install`` (or ``reset``)."""
        return len(self.events)

    @property
    def late(self) -> list[CompileEvent]:
        return [e for e in self.events if e.late]

    @property
    def late_count(self) -> int:
        return len(self.late)

    def install(self) -> bool:
        """Hook into Triton; False (and nothing done) when triton is not importable."""
        if self.installed:
            return True
        if self._slots is None:
            try:
                self._slots = _runtime_slots()
            except ImportError:
                return False
        obj, pre, post = self._slots
        self._prev = (getattr(obj, pre, None), getattr(obj, post, None))
        setattr(obj, pre, self._pre_hook)
        setattr(obj, post, self._post_hook)
        return True

    def uninstall(self) -> None:
        """Restore the hooks that were there before ``install``."""
        if not self.installed:
            return
        obj, pre, post = self._slots
        setattr(obj, pre, self._prev[0])
        setattr(obj, post, self._prev[1])
        self._prev = None
        self.armed = False

    def arm(
        self, on_compile: Callable[[CompileEvent], None] | None = None, *, strict: bool = False
    ) -> bool:
        """From now on every compile is late: call ``on_compile(event)``, and under
        ``strict`` raise ``LateCompileError`` before Triton compiles. Installs the
        hook if needed; returns False when Triton is not there to watch."""
        if not self.install():
            return False
        self.on_compile, self.strict, self.armed = on_compile, strict, True
        return True

    def disarm(self) -> None:
        """Stop treating compiles as late; they are still counted until ``uninstall``."""
        self.armed = False
        self.on_compile = None

    def reset(self) -> None:
        with self._lock:
            self.events.clear()
            self._pending.clear()

    def _pre_hook(self, *, key: Any = None, repr: Any = None, fn: Any = None, **kw: Any):
        compile_info = kw.get("compile") or {}
        event = CompileEvent(
            kernel=f"{getattr(fn, 'module', '?')}.{getattr(fn, 'name', '?')}",
            constexprs=_constexprs(fn, compile_info.get("constants")),
            key=str(key),
            signature=str(repr or ""),
            specialization=str(compile_info.get("specialization_data") or ""),
            device=compile_info.get("device"),
            warmup=bool(kw.get("is_manual_warmup", False)),
            late=self.armed,
        )
        with self._lock:
            self.events.append(event)
            self._pending[f"{event.kernel}|{event.key}"] = event
        if event.late:
            if self.on_compile is not None:
                self.on_compile(event)
            if self.strict:
                raise LateCompileError(event)
        prev = self._prev[0] if self._prev else None
        # A truthy return tells Triton to skip the compile: only a chained hook decides.
        return prev(key=key, repr=repr, fn=fn, **kw) if prev is not None else None

    def _post_hook(self, *, key: Any = None, repr: Any = None, fn: Any = None, **kw: Any):
        name = f"{getattr(fn, 'module', '?')}.{getattr(fn, 'name', '?')}|{key}"
        with self._lock:
            event = self._pending.pop(name, None)
        if event is not None:
            event.seconds = time.monotonic() - event.started
        elif not hasattr(fn, "jit_function"):  # Inductor's compile: no pre-hook ran for it
            self._inductor(key, fn)
        prev = self._prev[1] if self._prev else None
        return prev(key=key, repr=repr, fn=fn, **kw) if prev is not None else None

    def _inductor(self, key: Any, fn: Any) -> None:
        inner = getattr(fn, "fn", fn)
        kernel = (
            f"{getattr(inner, '__module__', None) or 'inductor'}.{getattr(inner, '__name__', '?')}"
        )
        event = CompileEvent(kernel, {}, str(key), late=self.armed, kind="inductor")
        with self._lock:
            self.events.append(event)
        if event.late and self.on_compile is not None:
            self.on_compile(event)  # after the fact: Inductor has compiled it already


watch = JitWatch()
"""The process-wide watchdog the worker arms."""


def jit_functions() -> list[Any]:
    """Every ``@triton.jit`` function a loaded module holds at top level (autotuned and
    heuristic wrappers unwrapped), each once."""
    try:
        from triton.runtime.autotuner import Autotuner, Heuristics
        from triton.runtime.jit import JITFunction
    except ImportError:
        return []
    found: dict[int, Any] = {}
    with warnings.catch_warnings():  # a deprecated module attribute may warn on access
        warnings.simplefilter("ignore")
        for name, module in list(sys.modules.items()):
            names = getattr(module, "__dict__", None)
            if not isinstance(names, dict):
                continue
            mark = (id(module), len(names))
            held = _SCANNED.get(name)
            if held is None or held[0] != mark:
                held = (mark, _jit_in(list(names.values()), Autotuner | Heuristics, JITFunction))
                _SCANNED[name] = held
            for fn in held[1]:
                found.setdefault(id(fn), fn)
    return list(found.values())


_SCANNED: dict[str, tuple[tuple[int, int], tuple[Any, ...]]] = {}
"""Per module name, the module's identity and size when last read, and its ``@triton.jit``
functions then: the stage asks after every wave (39 times on one H200 boot), and a full read
of every module took 7% of its thread (docs/changelog.md, 2026-12-03). A module read again
is one replaced or grown since (a kernel is defined at import, so a module still importing
grows)."""


def _jit_in(objects: list[Any], wrappers: Any, jit: type) -> tuple[Any, ...]:
    out = []
    for obj in objects:
        # type(), not isinstance(): no module attribute's __class__ hook runs
        while issubclass(type(obj), wrappers):
            obj = obj.fn
        if issubclass(type(obj), jit):
            out.append(obj)
    return tuple(out)


def unwrap(obj: Any) -> Any:
    """The ``@triton.jit`` function under autotuner and heuristics wrappers."""
    from triton.runtime.autotuner import Autotuner, Heuristics

    while issubclass(type(obj), Autotuner | Heuristics):
        obj = obj.fn
    return obj


def autotuners() -> dict[int, Any]:
    """The autotuners that benchmark (more than one config), by ``id`` of the
    ``@triton.jit`` function they wrap: a key value they have not tuned benchmarks every
    config at its first launch."""
    try:
        from triton.runtime.autotuner import Autotuner, Heuristics
    except ImportError:
        return {}
    found: dict[int, Any] = {}
    for obj in _module_objects():
        tuner = None
        while issubclass(type(obj), Autotuner | Heuristics):
            if tuner is None and issubclass(type(obj), Autotuner):
                tuner = obj
            obj = obj.fn
        if tuner is not None and len(getattr(tuner, "configs", ())) > 1:
            found.setdefault(id(obj), tuner)
    return found


def _module_objects() -> Iterator[Any]:
    """Every top-level object of every loaded module."""
    import sys

    with warnings.catch_warnings():  # a deprecated module attribute may warn on access
        warnings.simplefilter("ignore")
        for module in list(sys.modules.values()):
            names = getattr(module, "__dict__", None)
            if isinstance(names, dict):
                yield from list(names.values())


def loaded() -> dict[str, int]:
    """Triton specializations this process holds, per kernel (``module.qualname``): each
    one compiled or loaded from the disk cache here. Reads Triton's in-process caches and
    installs nothing, so counting cannot change what a launch does."""
    out: dict[str, int] = {}
    for fn in jit_functions():
        held = sum(len(caches[0]) for caches in list(fn.device_caches.values()))
        if held:
            name = f"{fn.fn.__module__}.{fn.fn.__qualname__}"
            out[name] = out.get(name, 0) + held
    return out


@contextlib.contextmanager
def launched_in_block() -> Iterator[set[str]]:
    """The kernels (``module.qualname``) launched while the block runs, compiled or not: a
    launch of a kernel that exists now goes through its ``run`` (a layer of ``run_chain``
    for the block, beside any other: a compile-only pass inside it), and one whose key is
    new shows in Triton's caches."""
    from launcher.runtime import run_chain

    found: set[str] = set()
    before = loaded()

    def counting(fn: Any) -> run_chain.Layer:
        name = f"{fn.fn.__module__}.{fn.fn.__qualname__}"

        def layer(below: Any) -> Any:
            def run(*args: Any, **kwargs: Any) -> Any:
                found.add(name)
                return below(*args, **kwargs)

            return run

        return layer

    try:
        with run_chain.observing(jit_functions(), counting):
            yield found
    finally:
        found.update(new_since(before))


def new_since(before: dict[str, int], now: dict[str, int] | None = None) -> dict[str, int]:
    """Specializations per kernel that ``now`` (default: ``loaded()``) holds beyond
    ``before``."""
    now = loaded() if now is None else now
    return {k: n - before.get(k, 0) for k, n in now.items() if n > before.get(k, 0)}


def arm(on_compile: Callable[[CompileEvent], None] | None = None, *, strict: bool = False) -> bool:
    return watch.arm(on_compile, strict=strict)


def disarm() -> None:
    watch.disarm()
