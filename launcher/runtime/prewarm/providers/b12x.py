"""The b12x prewarm provider: prepare every b12x plan the profile implies before sizing.

``specializations`` lists the shapes without importing torch or b12x (the dry run calls
it). ``build_requests`` turns them into b12x plans and ``PreparationRequest``s whose
prepare calls run each kernel once on synthetic tensors: sparse MLA and the DSA indexer
need no model weights. The fused MoE does: b12x's ``plan_execution`` takes
``PreparedExperts`` (prepared weight tensors), so MoE requests are built only from
experts found on the worker's model (``ctx.model_runner``); elsewhere the MoE shapes are
sized (``launcher.plan.b12x_sizing``) but left to vLLM's own warmup.

Prepared programs land in b12x's compile cache under the key of this process's
environment. The provider never sets a ``B12X_*``, ``CUTE_*`` or ``CUTLASS_*`` variable:
any such variable outside b12x's allow-list changes that key, and serving would then
miss every program prepared here.

Which vLLM runs decides whether this provider applies at all: the fork line Gilded
Gnosis runs ``sparkinfer``, a different package with its own compile cache, so nothing
prepared here would be reused; its plans are prewarmed through the runtime provider
(``why_not`` says so). On the b12x-package line the plans carry the runtime's own
``Caps``: natural LSE, fp8 RoPE per ``VllmLine.fp8_rope`` and only the token counts the
runtime runs (``launcher.plan.b12x_sizing``).

Nothing here was run on an SM12x GPU: the prepare calls follow b12x 1.5.1's
bind/prime/run API and b12x's own startup builders.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from launcher.plan import b12x_sizing as sizing
from launcher.runtime.prewarm import PrewarmContext, PrewarmResult
from launcher.runtime.prewarm.flow import NONE, Fact
from launcher.runtime.prewarm.model.moe_units import MoeUnits, find_moe_units
from launcher.vllm.internals import read_on

WAITING = "fused_moe: looked up after the model's first forward"
"""The MoE group's note while it waits for a forward (replaced by what it then found)."""
LATE_MARK = "was not prepared before its first use"
"""b12x.preparation logs this (once per declaration) before a first-use compile."""
logger = logging.getLogger("launcher.runtime.prewarm.providers.b12x")


class B12xProvider:
    name = "b12x"
    provides = frozenset({Fact.LAUNCHED})
    needs = uses = NONE

    def __init__(self) -> None:
        self.sessions: list[Any] = []
        self._handler: logging.Handler | None = None
        self.units: MoeUnits | None = None
        """The EXL3 MoE units found on the worker's model (``run`` looks them up)."""

    def applies(self, ctx: PrewarmContext) -> bool:
        return not self.why_not(ctx)

    def why_not(self, ctx: PrewarmContext) -> str:
        """One line on why this provider does nothing here; empty when it applies."""
        p, f = ctx.profile, ctx.facts
        if p.hardware.gpu == "cpu":
            return "no b12x kernels on a cpu deployment"
        runtime = ctx.deployment.runtime
        if runtime.kernel_package not in (None, "b12x"):
            return (
                f"runtime {runtime.name} runs {runtime.kernel_package}; its plans are "
                "prewarmed through the runtime provider"
            )
        if not (sizing.uses_b12x_attention(ctx.deployment, f) or sizing.uses_b12x_moe(p, f)):
            return "no b12x kernels in this deployment"
        return ""

    def specializations(self, ctx: PrewarmContext) -> list[str]:
        out = sizing.describe(sizing.specs(ctx.deployment, ctx.facts))
        if out and sizing.uses_b12x_moe(ctx.profile, ctx.facts) and ctx.model_runner is None:
            out[-1] += " (sized; prepared only from the model's own experts)"
        return out

    def build_requests(self, ctx: PrewarmContext) -> dict[str, list[Any]]:
        """b12x requests by group (sparse_mla, dsa_indexer, fused_moe); imports b12x. The
        fused MoE needs the model's own experts: empty until ``run`` has looked them up."""
        dev = ctx.device
        shapes: dict[str, list[Any]] = {"sparse_mla": [], "dsa_indexer": []}
        for g in sizing.groups(sizing.specs(ctx.deployment, ctx.facts)):
            if g.prewarmed and g.kernel in shapes:  # fused_moe: from the model's own experts
                shapes[g.kernel] += g.specs
        return {
            "sparse_mla": [
                sizing.mla_plan(m, dev).request(
                    name=f"b12x.sparse_mla.{m.mode}.m{m.rows}", prepare_call=_mla_call(m, dev)
                )
                for m in shapes["sparse_mla"]
            ],
            "dsa_indexer": [
                sizing.indexer_plan(i, dev).request(
                    name=f"b12x.dsa_indexer.{i.mode}.m{i.rows}", prepare_call=_index_call(i, dev)
                )
                for i in shapes["dsa_indexer"]
            ],
            "fused_moe": self.moe_requests(ctx),
        }

    def run(self, ctx: PrewarmContext) -> PrewarmResult:
        started = time.monotonic()
        result = PrewarmResult(self.name, specializations=self.specializations(ctx))
        if reason := self.why_not(ctx):
            result.skipped = reason
            return result
        try:
            import b12x  # noqa: F401
        except Exception as exc:
            result.skipped = f"b12x is not importable: {exc}"
            return result
        log = _logger(ctx)
        # fused_moe is empty here (no units looked up yet): _moe_group prepares it
        problems = self._prepare(ctx, self.build_requests(ctx), result, log)
        if sizing.uses_b12x_moe(ctx.profile, ctx.facts):
            found = find_moe_units(ctx.model_runner) if ctx.model_runner is not None else None
            if found is not None and not found.total:
                # The fork creates its EXL3 MoE units on each layer's first forward: look
                # again after the runtime provider's serving waves (or after the last one).
                ctx.after_forward.append(lambda: self._moe_after_forward(ctx, result, log))
                problems.append(WAITING)
            else:
                self.units = found
                problems += self._moe_group(ctx, result, log)
        result.skipped = "; ".join(problems)
        result.seconds = time.monotonic() - started
        return result

    def moe_requests(self, ctx: PrewarmContext) -> list[Any]:
        """Requests for the PreparedExperts among the units looked up (imports b12x)."""
        if not self.units or not self.units.experts:
            return []
        return _moe_requests(sizing.specs(ctx.deployment, ctx.facts).moe, self.units.experts)

    def _moe_group(
        self,
        ctx: PrewarmContext,
        result: PrewarmResult,
        log: Callable[[str], None],
        after_forward: bool = False,
    ) -> list[str]:
        """Report the units looked up, prepare the PreparedExperts among them; problems."""
        problems = self._report_moe_units(ctx, log, after_forward)
        return problems + self._prepare(ctx, {"fused_moe": self.moe_requests(ctx)}, result, log)

    def _moe_after_forward(
        self, ctx: PrewarmContext, result: PrewarmResult, log: Callable[[str], None]
    ) -> None:
        """The MoE group, once a forward has filled the model's units; ``result`` (already
        reported) says what was found and prepared."""
        started = time.monotonic()
        self.units = find_moe_units(ctx.model_runner)
        problems = self._moe_group(ctx, result, log, after_forward=True)
        notes = [n for n in result.skipped.split("; ") if n and n != WAITING]
        result.skipped = "; ".join(notes + problems)
        result.seconds += time.monotonic() - started

    def _prepare(
        self,
        ctx: PrewarmContext,
        groups: dict[str, list[Any]],
        result: PrewarmResult,
        log: Callable[[str], None],
    ) -> list[str]:
        """Prepare each group in a session of its own (a group that fails is closed alone)."""
        from b12x import PreparationSession

        p = ctx.profile.prewarm
        problems = []
        for group, requests in groups.items():
            if not requests:
                continue
            session = PreparationSession(
                device=ctx.device, autotune=p.autotune, compile_workers=p.compile_workers
            )
            try:
                done = session.prepare(requests, progress=_Progress(log, group))
            except Exception as exc:
                session.close()
                problems.append(f"{group}: {type(exc).__name__}: {exc}")
                log(f"b12x prewarm: {group} failed: {exc}")
                continue
            self.sessions.append(session)
            result.warmed += len(done.plans)
            summary = done.compilation
            if summary is not None:
                result.compiled += summary.cute_compilations + summary.triton_compilations
        return problems

    def _report_moe_units(
        self, ctx: PrewarmContext, log: Callable[[str], None], after_forward: bool = False
    ) -> list[str]:
        """Report the EXL3 MoE units looked up; problems to report (loud when none)."""
        if ctx.model_runner is None or self.units is None:
            return ["fused_moe: needs the worker's model (prepared only from its own experts)"]
        when = " after the model's first forward" if after_forward else ""
        if not self.units.total:
            text = f"fused_moe: 0 units found{when} for an EXL3 MoE deployment ({self.units.where})"
            logger.warning("b12x prewarm: %s", text)
            return [text]
        ran = len(self.units.tensor_experts) + sum(map(len, self.units.runtimes.values()))
        log(
            f"b12x prewarm: fused_moe{when}: {self.units.describe()}"
            + (
                f"; {ran} compiled by the runtime's own forward at the token counts it ran "
                "(b12x plans only PreparedExperts)"
                if ran
                else ""
            )
        )
        return []

    def freeze(
        self,
        ctx: PrewarmContext,
        on_late_compile: Callable[[str, str], None],
        *,
        strict: bool = False,
    ) -> None:
        """Arm the late-JIT watchdog: the report when the stage ends, and again with
        ``strict`` (from ``prewarm.strict_jit``) once vLLM's own warmup and capture are done.

        How a late compile reaches ``on_late_compile(kernel, detail)``:

        - b12x logs "<component>: <query> was not prepared before its first use" on the
          ``b12x.preparation`` logger before it compiles a plan nobody prepared (or refuses
          it when frozen). A handler on that logger reports it, in every mode.
        - With ``strict`` the sessions are frozen (``session.freeze()``): b12x
          then raises ``KernelResolutionFrozenError`` for any new kernel. It is raised in
          the serving step, inside vLLM's forward, where no provider can turn it into a
          call; when ``ctx.model_runner`` has ``execute_model`` that call is wrapped to
          report the error through ``on_late_compile`` before it propagates (fatal).
        - Without strict mode nothing is frozen: a frozen session turns a late compile into
          a failed step, and a late compile must only be logged there. b12x compiles
          in-process after the report.

        vLLM's backend declares its own plans and prepares them on first use (during its
        warmup, from the compile cache this prewarm filled): freezing before that warmup
        would refuse them.
        """
        self._unhook()
        self._handler = _LateHandler(on_late_compile)
        logging.getLogger("b12x.preparation").addHandler(self._handler)
        if not strict:
            return
        for session in self.sessions:
            session.freeze()
        runner = ctx.model_runner
        step = read_on("runner.execute_model", runner)
        if callable(step):
            runner.execute_model = _reporting(step, on_late_compile)

    def close(self) -> None:
        """Release the prepared plans and the log handler."""
        self._unhook()
        while self.sessions:
            self.sessions.pop().close()

    def _unhook(self) -> None:
        if self._handler is not None:
            logging.getLogger("b12x.preparation").removeHandler(self._handler)
            self._handler = None


class _LateHandler(logging.Handler):
    def __init__(self, on_late_compile: Callable[[str, str], None]):
        super().__init__(logging.WARNING)
        self.on_late_compile = on_late_compile

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if LATE_MARK in message:
            kernel = str(record.args[0]) if isinstance(record.args, tuple) else "b12x"
            self.on_late_compile(kernel, message)


def _reporting(step: Callable[..., Any], on_late_compile: Callable[[str, str], None]):
    from b12x import KernelResolutionFrozenError

    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return step(*args, **kwargs)
        except KernelResolutionFrozenError as exc:
            text = str(exc)
            target = next((w[7:] for w in text.split("; ") if w.startswith("target=")), "b12x")
            on_late_compile(target, text)
            raise

    return guarded


class _Progress:
    """Log a line when b12x's phase or completed-request count changes."""

    def __init__(self, log: Callable[[str], None], group: str):
        self.log, self.group, self.last = log, group, ("", -1)

    def __call__(self, state: Any) -> None:
        key = (state.phase, state.completed_requests)
        if key == self.last:
            return
        self.last = key
        self.log(
            f"b12x prewarm {self.group}: {state.phase} {state.completed_requests}/"
            f"{state.total_requests} requests, {state.compilations} compiled, "
            f"{state.cache_hits} cached, {state.elapsed_seconds:.1f}s"
        )


def _logger(ctx: PrewarmContext) -> Callable[[str], None]:
    if ctx.log is not None:
        return ctx.log
    return logger.info


# ------------------------------------------------------ prepare calls (run on the GPU)


def _scratch(specs: Any, device: str) -> Any:
    import torch

    (spec,) = tuple(specs)  # b12x's attention plans use one uint8 scratch buffer
    return torch.empty(spec.shape, dtype=spec.dtype, device=device)


def _mla_call(s: sizing.MlaSpec, device: str) -> Callable[[Any], Any]:
    """Sparse MLA over a small zeroed KV pool, every row selecting ``width`` tokens."""

    def factory(state: Any) -> Any:
        import torch
        from b12x.preparation import PreparedCall

        caps = state.caps
        pages = -(-s.width // s.page_size) + 1
        kv = torch.zeros(
            (pages, s.page_size, caps.cache_record_bytes), dtype=caps.kv_dtype, device=device
        )
        q = torch.randn((s.rows, s.heads, s.head_dim), dtype=caps.dtype, device=device)
        picked = torch.arange(s.width, dtype=torch.int32, device=device).repeat(s.rows, 1)
        binding = state.bind(
            scratch=_scratch(state.scratch_specs(), device),
            q=q,
            selected_indices=picked,
            cache_seqlens_int32=torch.full(
                (caps.max_batch,), s.width, dtype=torch.int32, device=device
            ),
            nsa_cache_seqlens_int32=torch.full(
                (s.rows,), s.width, dtype=torch.int32, device=device
            ),
            kv_cache=kv,
        )
        state.prime(binding, kv_cache=kv)
        return PreparedCall(run=lambda: state.run(binding, kv_cache=kv), owners=(kv, q, binding))

    return factory


def _index_call(s: sizing.IndexerSpec, device: str) -> Callable[[Any], Any]:
    """The FP8 indexer over the full page-table width, pages mapped onto a small pool."""

    def factory(state: Any) -> Any:
        import torch
        from b12x.preparation import PreparedCall

        caps = state.layout.caps
        pool = min(s.pages, 64)
        record = sizing.INDEX_PAGE * (s.head_dim + 4 * -(-s.head_dim // 128))
        cache = torch.zeros((pool, record), dtype=torch.uint8, device=device)
        table = (torch.arange(s.pages, dtype=torch.int32, device=device) % pool).repeat(s.rows, 1)
        tokens = s.pages * sizing.INDEX_PAGE
        q = torch.randn((s.rows, s.heads, s.head_dim), device=device).to(torch.float8_e4m3fn)
        weights = torch.randn((s.rows, s.heads), dtype=torch.float32, device=device)
        out = torch.empty((s.rows, s.topk), dtype=torch.int32, device=device)
        runtime = state.bind(
            scratch=_scratch(state.layout.scratch_specs(), device),
            real_page_table=table,
            cache_seqlens_int32=torch.full((s.rows,), tokens, dtype=torch.int32, device=device),
            active_width=torch.tensor([tokens], dtype=torch.int32, device=device),
            expected_num_q_heads=caps.num_q_heads,
            shared_page_table=caps.shared_page_table,
            output_physical_slots=caps.output_physical_slots,
        )

        def run() -> Any:
            return state.run(
                runtime, q_fp8=q, query_weights=weights, index_k_cache=cache, output_indices=out
            )

        return PreparedCall(run=run, owners=(cache, table, q, weights, out, runtime))

    return factory


def _moe_requests(s: sizing.MoeSpec, experts_found: list[Any]) -> list[Any]:
    """Requests for the model's own ``PreparedExperts`` (b12x needs the real weights)."""
    from b12x.moe import fused_moe

    requests = []
    for experts in experts_found:
        plan = fused_moe.plan_execution(
            experts=experts,
            capacity=fused_moe.ExecutionCapacity(
                max_tokens=s.tokens[-1], top_k=s.top_k, warmup_token_counts=s.tokens[:-1]
            ),
        )
        counts = getattr(plan, "token_counts", (s.tokens[-1],))
        calls = {n: _moe_call(experts, n, s.top_k) for n in counts}
        name = f"b12x.fused_moe.e{experts.num_experts}.i{experts.intermediate_size}"
        if hasattr(plan, "token_counts"):
            requests.append(plan.request(name=name, prepare_calls=calls))
        else:
            requests.append(plan.request(name=name, prepare_call=calls[counts[0]]))
    return requests


def _moe_call(experts: Any, tokens: int, top_k: int) -> Callable[[Any], Any]:
    def factory(state: Any) -> Any:
        import torch
        from b12x.preparation import PreparedCall

        dev = experts.device
        scratch = tuple(
            torch.empty(x.shape, dtype=x.dtype, device=dev) for x in state.scratch.scratch_specs()
        )
        a = torch.randn((tokens, experts.hidden_size), dtype=torch.bfloat16, device=dev)
        ids = torch.randint(0, experts.num_experts, (tokens, top_k), dtype=torch.int32, device=dev)
        weights = torch.full((tokens, top_k), 1.0 / top_k, device=dev)
        output = torch.empty_like(a)
        binding = state.bind(
            experts=experts,
            scratch=scratch,
            a=a,
            output=output,
            topk_ids=ids,
            topk_weights=weights,
            input_scales_static=True,
        )
        return PreparedCall(
            run=lambda: state.run(binding), output=output, owners=(scratch, a, ids, binding)
        )

    return factory
