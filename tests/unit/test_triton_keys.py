"""The provider compiles the keys serving launches: Triton's own binder, on a CPU.

Triton keys a compiled kernel on each argument's type and specialization: integers equal to 1
or divisible by 16, pointers 16-byte aligned or not (``('*i32', 'D')`` vs ``('*i32', '')``),
and the constexprs. Here the binder Triton builds for a kernel (``create_function_from_signature``
with the base backend: nothing is compiled or launched) computes those keys for the triton
provider's calls and for a replay of the serving call sites, through the GPU tier's stand-in of
vLLM's indexer builder (tests/gpu/dcp_standins.py, which slices ``uncompressed_seq_lens`` by the
prefills' first request as vLLM 0.26's ``build_prefill_chunk_metadata`` does). A serving key the
provider never produced is a late compile.
"""

from __future__ import annotations

import pytest

from tests.conftest import PROFILES, need_serving

torch = need_serving("torch")
need_serving("triton")

from triton.backends.compiler import BaseBackend  # noqa: E402
from triton.runtime.jit import create_function_from_signature  # noqa: E402

from launcher.deployment import resolve  # noqa: E402
from launcher.plan.model import load_facts  # noqa: E402
from launcher.profile import load_profile  # noqa: E402
from launcher.runtime.prewarm import PrewarmContext  # noqa: E402
from launcher.runtime.prewarm.providers import triton_kernels as tk  # noqa: E402
from tests.gpu import dcp_standins as ds  # noqa: E402


@pytest.fixture
def keys(monkeypatch) -> list[str]:
    """Replace the stand-in kernel's launch by Triton's binder: each call records its key."""
    return _recording(monkeypatch, ds._build_prefill_chunk_metadata_kernel)


def provider_keys(keys: list[str]) -> set[str]:
    p = load_profile(PROFILES / "glm52.yaml").profile
    ctx = PrewarmContext(
        resolve(p), load_facts(p.model.path, p.model.architecture), rank=1, device="cpu"
    )
    (kernel,) = tk._prefill_chunk_metadata(ctx, tk.dcp_of(ctx))
    kernel.launch(ds.build_prefill_chunk_metadata, "cpu")
    found = set(keys)
    keys.clear()
    return found


def serving_keys(keys: list[str]) -> set[str]:
    """vLLM's indexer builder for batches of 0-3 decode rows then 1-2 prefills of 1-700
    tokens: the prefills' chunk starts at request index = number of decode rows."""
    for decodes in range(4):
        for prefills, qlen in ((1, 1), (1, 37), (2, 300), (1, 16)):
            total = decodes + prefills
            lens = [1] * decodes + [qlen] * prefills
            starts_cpu = torch.tensor(
                [0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32
            )
            seq_cpu = torch.tensor([512 + n for n in lens], dtype=torch.int32)
            ds.build_prefill_chunk_metadata(
                decodes, total, starts_cpu.clone(), starts_cpu, seq_cpu.clone(), seq_cpu.clone(),
                seq_cpu, torch.zeros((total, 8), dtype=torch.int32), 1,
                dcp_rank=1, dcp_world_size=4, cp_kv_cache_interleave_size=1,
            )  # fmt: skip
    found = set(keys)
    keys.clear()
    return found


def test_every_serving_key_of_the_prefill_metadata_kernel_is_compiled_before_sizing(keys):
    prewarmed, served = provider_keys(keys), serving_keys(keys)
    assert served, "the replay launched nothing"
    assert served <= prewarmed, sorted(served - prewarmed)


def test_without_the_row_offsets_a_prefill_behind_decode_rows_would_compile_late(keys, monkeypatch):
    """The check above can fail: prewarm only aligned calls (the provider of 2026-11-30) and the
    unaligned seq-lens slice of a prefill behind 1-3 decode rows is a key of its own."""
    monkeypatch.setattr(tk, "PREFILL_ROW_OFFSETS", (0,))
    prewarmed, served = provider_keys(keys), serving_keys(keys)
    missing = served - prewarmed
    assert missing and all("('*i32', '')" in key for key in missing)


def _recording(monkeypatch, kernel) -> list[str]:
    """Triton's binder in place of ``kernel``'s launch: each call records its key."""
    binder = create_function_from_signature(kernel.signature, kernel.params, BaseBackend)
    seen: list[str] = []

    def run(*args, grid, warmup, **kwargs):
        _, specialization, _ = binder(*args, **kwargs)
        seen.append(str(specialization))

    monkeypatch.setattr(kernel, "run", run)
    return seen


def test_the_all_to_all_combine_keys_serving_launches_are_compiled_before_sizing(monkeypatch):
    """``--dcp-comm-backend a2a``: vLLM's own pack and unpack kernels (the installed vLLM's
    ``dcp_a2a_lse_reduce`` call sites replayed without the exchange) for decode batches of
    every size up to max_num_seqs, masked (per request) and not."""
    import triton

    dcp_ops = need_serving("vllm.v1.attention.ops.dcp")
    # vLLM on a CPU keeps its kernels as plain functions (no Triton backend): the real
    # decorator gives them Triton's parameters back, to bind (nothing compiles).
    monkeypatch.setattr(dcp_ops, "triton", triton)
    kernels = {}
    for name in ("_dcp_a2a_pack_send_kernel", "_dcp_a2a_unpack_combine_kernel"):
        fn = getattr(dcp_ops, name)
        kernels[name] = fn if hasattr(fn, "params") else triton.jit(fn)
        monkeypatch.setattr(dcp_ops, name, kernels[name])
    pack = _recording(monkeypatch, kernels["_dcp_a2a_pack_send_kernel"])
    unpack = _recording(monkeypatch, kernels["_dcp_a2a_unpack_combine_kernel"])
    p = load_profile(PROFILES / "glm52.yaml", ("parallel.dcp_comm_backend=a2a",)).profile
    ctx = PrewarmContext(
        resolve(p), load_facts(p.model.path, p.model.architecture), rank=1, device="cpu"
    )
    found = [k for k in tk.kernels(ctx) if "a2a" in k.name]
    assert [k.name for k in found] == [
        "_dcp_a2a_pack_send_kernel",
        "_dcp_a2a_unpack_combine_kernel",
    ]
    assert not [k for k in tk.kernels(ctx) if k.name == "correct_attn_out"]  # a2a merges itself
    for kernel in found:
        fn, _ = tk.find_launcher(kernel)
        kernel.launch(fn, "cpu")
    prewarmed = {"pack": set(pack), "unpack": set(unpack)}
    pack.clear()
    unpack.clear()
    heads, dim = 64, 512  # 16 per TP rank, all-gathered over DCP 4; the latent
    for b in range(1, p.serving.max_num_seqs + 1):
        out = torch.zeros(b, heads, dim, dtype=torch.bfloat16)
        lse = torch.zeros(b, heads)
        send = torch.empty(4, b, heads // 4, dim + 2, dtype=torch.bfloat16)
        masked = {
            "seq_lens": torch.ones(b, dtype=torch.int32),
            "query_start_loc": torch.arange(b + 1, dtype=torch.int32),
        }
        for extra in ({}, masked):
            dcp_ops._dcp_a2a_pack_send(out, lse, send, 4, heads // 4, dim, 2, **extra)
        dcp_ops._dcp_a2a_unpack_combine(send, dim, 2, False, True)
    served = {"pack": set(pack), "unpack": set(unpack)}
    for name in served:
        assert served[name], f"the replay launched no {name}"
        assert served[name] <= prewarmed[name], (name, sorted(served[name] - prewarmed[name]))
