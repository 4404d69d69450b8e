"""Whether the profile's vLLM line can run the deployment, known before any weight loads.

The dry run and ``validate`` check here, where the model's facts are known: a profile that
leaves the backend to vLLM (``auto``) gets the one vLLM picks for the model and card (sparse
MLA for a model with the DSA indexer). The table is ``launcher.profile.capabilities``; a
launch checks the installed vLLM's own classes (``launch.preflight.installed_line_issues``).
"""

from __future__ import annotations

from dataclasses import replace

from launcher.errors import ProfileError
from launcher.plan.catalog import GpuKind
from launcher.plan.model import ModelFacts
from launcher.profile import LoadedProfile, capabilities
from launcher.profile.capabilities import Line
from launcher.profile.schema import Profile
from launcher.profile.vllm_runtime import VllmLine


def arch_major(gpu: GpuKind) -> int:
    """The card's compute-capability major (``sm_90`` -> 9); 0 for the CPU backend."""
    digits = "".join(c for c in gpu.arch if c.isdigit())
    return int(digits[:-1] or 0) if len(digits) >= 2 else 0


def issues(
    p: Profile, f: ModelFacts, gpu: GpuKind, line: Line, *, installed: bool = False
) -> list[tuple[str, str]]:
    """What ``line`` cannot run of ``p`` on ``gpu`` for model ``f``, as ``(key, message)``.

    ``installed``: ``line`` holds the installed vLLM's own figures where it could read them
    (the launch); else it is the table's (the dry run)."""
    arch = arch_major(gpu)
    if arch == 0:
        return []
    backend, how = capabilities.chosen_backend(
        line,
        p.vllm.attention_backend,
        mla=f.is_mla,
        indexer=f.has_indexer,
        arch=arch,
        kv_dtype=p.serving.kv_cache_dtype,
        heads=max(1, f.heads // p.parallel.tensor),
    )
    if backend is None:
        return []
    if installed:
        read = capabilities.read_installed(line, backend)
        if read is not None:
            # replace: the line's other facts (title, indexer limit) stay the table's
            line = replace(line, backends={**line.backends, backend: read})
    if p.vllm.release == "auto" and line.upstream_release and not installed:
        how += f"; vllm.release auto checks {capabilities.DRY_RUN_RELEASE}"
    out = capabilities.what_cannot_run(
        line,
        backend,
        dcp=p.parallel.decode_context,
        interleave=p.parallel.interleave,
        mtp=p.mtp_tokens,
        indexer=f.has_indexer,
        how=how,
        arch=arch,
    )
    # vLLM's own choice is made to fit these; a launch reads only the impl's decode LSE
    if p.vllm.attention_backend and not installed:
        out += capabilities.kv_dtype_issue(line, backend, p.serving.kv_cache_dtype, how)
        if p.serving.block_size:
            out += capabilities.block_issue(line, backend, p.serving.block_size, how)
    return out


def check(loaded: LoadedProfile, f: ModelFacts, gpu: GpuKind, runtime: VllmLine) -> None:
    """Refuse (``ProfileError``, each issue at its key with the fix) what the profile's line
    cannot run."""
    p = loaded.profile
    found = issues(p, f, gpu, runtime.table(p.vllm.release))
    if found:
        raise ProfileError([loaded.issue(key, message) for key, message in found])
