"""Triton helper kernels whose constexprs depend on the DCP size, interleave and rank.

vLLM compiles them on the first decode step that needs them, after sizing. This
provider runs each one once per specialization the deployment implies, on dummy
tensors of the serving shapes, so the compile (and its memory) happens before sizing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from launcher.prewarm import PrewarmContext, PrewarmResult
from launcher.profile.rules import capture_sizes


@dataclass(frozen=True)
class Call:
    description: str
    run: Callable[[str], None]
    """Runs the kernel once on the given device."""


def _dcp_heads(ctx: PrewarmContext) -> tuple[int, int, int]:
    p, f = ctx.profile, ctx.facts
    return (
        p.parallel.decode_context,
        max(1, f.heads // p.parallel.tensor),
        f.kv_lora_rank or f.head_dim,
    )


def _correct_attn_out(ctx: PrewarmContext) -> Iterator[Call]:
    """``vllm.v1.attention.ops.dcp.correct_attn_out``: N = DCP size, HEAD_DIM = latent."""
    dcp, heads, dim = _dcp_heads(ctx)
    if dcp <= 1:
        return
    rows = sorted({*capture_sizes(ctx.profile), ctx.profile.serving.max_num_seqs})
    cp_rank = ctx.rank % dcp
    for base_e in (True, False):

        def run(device: str, base_e: bool = base_e) -> None:
            import torch
            from vllm.v1.attention.ops.dcp import CPTritonContext, correct_attn_out

            for b in rows:
                out = torch.zeros(b, heads, dim, device=device, dtype=torch.bfloat16)
                lses = torch.zeros(dcp, b, heads, device=device, dtype=torch.float32)
                correct_attn_out(out, lses, cp_rank, CPTritonContext(), is_lse_base_on_e=base_e)

        yield Call(
            f"dcp.correct_attn_out N={dcp} H={heads} D={dim} rank={cp_rank} "
            f"base_e={base_e} rows={rows}",
            run,
        )


TARGETS: tuple[Callable[[PrewarmContext], Iterator[Call]], ...] = (_correct_attn_out,)


class TritonProvider:
    name = "triton"

    def applies(self, ctx: PrewarmContext) -> bool:
        return ctx.profile.hardware.gpu != "cpu" and any(True for t in TARGETS for _ in t(ctx))

    def specializations(self, ctx: PrewarmContext) -> list[str]:
        return [call.description for target in TARGETS for call in target(ctx)]

    def run(self, ctx: PrewarmContext) -> PrewarmResult:
        from launcher import jit_watch

        result = PrewarmResult(self.name)
        before = jit_watch.watch.count
        start = time.perf_counter()
        for target in TARGETS:
            for call in target(ctx):
                try:
                    call.run(ctx.device)
                    result.warmed += 1
                    result.specializations.append(call.description)
                except Exception as exc:  # a vLLM without this kernel: say so, go on
                    result.skipped += f"{call.description}: {type(exc).__name__}: {exc}; "
        result.compiled = jit_watch.watch.count - before
        result.seconds = time.perf_counter() - start
        return result

    def freeze(self, ctx: PrewarmContext, on_late_compile) -> None:
        """Late Triton compiles are caught by ``launcher.jit_watch``, which the worker arms."""
