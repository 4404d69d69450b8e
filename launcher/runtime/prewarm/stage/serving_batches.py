"""Serving-shaped batches on the scratch KV cache, through vLLM's own scheduler and runner.

What the deployment runs on its first requests is what vLLM's scheduler makes of them:
prefill chunks of ``max_num_batched_tokens`` and a ragged last one, decodes of every batch
size, a prefill behind decode rows, two prompts in one step, MTP draft steps and the
rejection sampler. So the stage hands requests to vLLM's own ``Scheduler`` (the class the
engine uses, over the scratch cache's ``KVCacheConfig``) and runs each step through the
worker's ``execute_model`` and ``sample_tokens``, as ``EngineCore.step`` does. Every rank runs
the same greedy (or seeded) requests, so tensor-parallel ranks stay in lockstep.

Then the request features the deployment's API accepts (``launcher.vllm.request_features``):
each sampler flag combination at one row and at eight or more, every other feature side by side
in a batch of ``max_num_seqs`` rows (``max_num_seqs x (1 + spec)`` rows in the rejection
sampler), and structured rows under an all-allowing grammar bitmask, so every kernel those
features reach has a template for the key enumeration.

Then the runner's own dummy batches that vLLM's CUDA-graph capture runs after sizing: a
uniform decode at every capture size (the MTP width included) and a mixed batch.

Last, vLLM's own sampler warmup (:func:`sampler_warmup`): the runner's dummy sampler run, which
vLLM's memory profile calls after the stage and its V1 worker again after sizing. Its dummy
metadata reaches keys no served request does: it fills top-k from a Python int, an int64
tensor, where the runner's input batch holds top-k as int32, so under MTP the rejection
sampler's ``expand_kernel`` takes an int64 input only there.

The waves are a pure function of the deployment's numbers (:func:`waves`), so
``b12x-launch prewarm --list`` prints them without a GPU.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from launcher.runtime import phases
from launcher.runtime.prewarm.diagnostics import thread_samples
from launcher.vllm.internals import InternalMissing, Missing, read_on, resolve

FIRST_ID = 4
"""Prompt ids start after the special tokens of the usual vocabularies."""
RAGGED = 37
"""The ragged long prompt's last prefill chunk, after as many whole chunks as the context holds:
a short query attending over nearly the whole context (vLLM's profile batch runs none)."""
PREFILL_CLASSES = (1, 2, 3, 15, 16, 17, 63, 64, 65, 127, 257, 1000)
"""Single prompts: Triton specializes integer arguments on 1 and on divisibility by 16, and
pointer arguments on 16-byte alignment, so lengths on each side of those lines."""


@dataclass(frozen=True)
class Shape:
    """The numbers of a deployment that decide the batches (vLLM's own, inside a worker)."""

    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    spec_tokens: int
    block_size: int
    dcp: int = 1
    capture_sizes: tuple[int, ...] = ()
    vocab: int = 32000
    index_topk: int = 0
    """The DSA indexer's top-k (0 without one): sparse MLA prefills with dense MHA when every
    prompt of the step is no longer than it."""
    sampling: bool = True
    """Include a request sampled at temperature > 0 (vLLM's CPU backend cannot: its
    sampler fails with "CPU Generator does not use offset")."""
    max_logprobs: int = 20
    """The most logprobs the API accepts (``--max-logprobs``; -1 read as the vocabulary)."""
    prompt_logprobs: str = "reserve"
    """``serving.prompt_logprobs``: ``refuse`` (the API answers HTTP 400) serves none."""

    @property
    def logical_block(self) -> int:
        return self.block_size * self.dcp


@dataclass(frozen=True)
class Arrival:
    """One request: added at scheduler ``step`` of its wave."""

    step: int
    prompt: int
    max_tokens: int
    sampled: bool = False
    """temperature 0.8, top-p 0.9, top-k 20; else greedy. Unseeded, as served requests are:
    tensor-parallel ranks draw alike because vLLM seeds every rank the same (a per-request
    seed would also take another sampler path, one vLLM's CPU backend lacks)."""
    feature: str = ""
    """A request feature (``request_features``) instead: its sampling parameters."""
    prefix: int = 0
    """Its first ``prefix`` tokens are the longest prompt's (``LONGEST_IDS``): where prefix
    caching is on, a cache hit, and only the rest is prefilled."""


@dataclass(frozen=True)
class Wave:
    name: str
    arrivals: tuple[Arrival, ...]
    sampler_kernel: bool = False
    """It launches the sampler's Triton top-k/top-p kernel (the slowest compile of a boot)."""

    def describe(self) -> str:
        shown = ", ".join(
            f"{a.prompt}+{a.max_tokens}" + (f"@{a.step}" if a.step else "") for a in self.arrivals
        )
        return f"{self.name}: {len(self.arrivals)} request(s) prompt+decode[@step] {shown}"


def waves(s: Shape) -> list[Wave]:
    """The requests the stage serves, wave by wave (each wave ends before the next). The
    wave that launches the sampler's Triton kernel goes first: the keys the early key
    enumeration derives from it (the slowest compiles of the stage) compile while the shape
    waves run."""
    features = feature_waves(s)
    if features and features[0].sampler_kernel:
        return features[:1] + _shape_waves(s) + features[1:]
    return _shape_waves(s) + features


def served_features(s: Shape) -> list[Any]:
    """The accepted request features the stage serves (vLLM's CPU backend: those that draw no
    random numbers; streaming is the API's, not the engine's)."""
    from launcher.vllm import request_features

    out = []
    for f in request_features.accepted(s.spec_tokens, s.max_logprobs, s.prompt_logprobs):
        if f.group == "streaming" or (f.body.get("temperature", 0) and not s.sampling):
            continue
        out.append(f)
    return out


SAMPLER_ROWS = 8
"""vLLM's sampler takes the Triton top-k/top-p kernel from 8 rows (fewer: a PyTorch sort)."""


def feature_waves(s: Shape) -> list[Wave]:
    """Every accepted request feature before sizing: each sampler flag combination at one row,
    the sampler's Triton kernel once at 8 or more rows, the rest side by side in a batch of
    max_num_seqs rows (drafting, the rejection sampler's rows), structured rows with and
    without unstructured ones beside."""
    feats = served_features(s)
    if not feats:
        return []
    seqs, width = s.max_num_seqs, 1 + s.spec_tokens
    rows = min(seqs, SAMPLER_ROWS)
    out = []
    flagged = [f for f in feats if f.group == "sampling" and f.sampler_flags is not None]
    if flagged:
        # Each flag combination alone at one row (the sort path: nothing compiles), then the
        # Triton kernel once, with the most flags on: the key enumeration derives the other
        # combinations' keys from that launch (``keys.VARIANT_RULES``) and compiles them in
        # parallel, where a wave per combination compiled them one by one (7-10 s each for the
        # GLM model on the H200).
        template = max(flagged, key=lambda f: sum(f.sampler_flags or ()))
        singles = tuple(Arrival(3 * i, 20 + i, 2, feature=f.name) for i, f in enumerate(flagged))
        step = 3 * len(flagged)
        batch = tuple(Arrival(step, 16 + i, 2 + width, feature=template.name) for i in range(rows))
        names = ", ".join(f.name for f in flagged)
        name = f"{names} at 1 row each, then {template.name} at {rows}"
        # Then the same rows with one greedy, then one seeded, row among them: vLLM's V2
        # sampler leaves FlashInfer for Triton on such a batch, on logits in the model's dtype
        # (0.26's GPU runner), which an all-sampled unseeded batch never reaches.
        mixed: tuple[Arrival, ...] = ()
        names_by = {f.name for f in feats}
        for n, other in enumerate(o for o in ("greedy", "seed") if o in names_by):
            at = step + (4 + 2 * width) * (n + 1)  # after the batch before it has finished
            rows_of = [
                Arrival(at, 40 + 10 * n + i, 2, feature=template.name) for i in range(rows - 1)
            ]
            mixed += (*rows_of, Arrival(at, 39 + 10 * n, 2, feature=other))
            name += f", then {rows - 1} beside one {other} row"
        out.append(Wave(name, singles + batch + mixed, sampler_kernel=True))
    side = [f for f in feats if f.sampler_flags is None and not f.structured]
    # Rows naming logprob_token_ids go in waves of their own, after the structured rows:
    # vLLM 0.26 under MTP failed a batch of them beside logprobs=N rows (a shape mismatch in
    # its sampler, H100 2026-12-06), and a wave that fails must leave no feature unserved.
    ids = [f for f in side if "logprob_token_ids" in f.body]
    out += _side_waves([f for f in side if f not in ids], seqs, width)
    structured = [f.name for f in feats if f.structured]
    if structured:
        only = tuple(
            Arrival(0, 12 + i, 2 + width, feature=structured[i % len(structured)])
            for i in range(rows)
        )
        out.append(Wave(f"{rows} structured rows", only))
        if seqs >= 2:
            beside = (Arrival(0, 30, 2 + width, feature=structured[0]), Arrival(0, 31, 2 + width))
            out.append(Wave("a structured row beside an unstructured one", beside))
    return out + _side_waves(ids, seqs, width)


def _side_waves(side: list[Any], seqs: int, width: int) -> list[Wave]:
    """Every feature of ``side`` beside the others, max_num_seqs rows a wave."""
    out = []
    for start in range(0, len(side), seqs):
        group = side[start : start + seqs]
        mixed = tuple(
            Arrival(0, 24 + i, 2 + 2 * width, feature=group[i % len(group)].name)
            for i in range(seqs)
        )
        out.append(Wave(f"{', '.join(f.name for f in group)} side by side in {seqs} rows", mixed))
    return out


def _long_waves(s: Shape) -> list[Wave]:
    """The longest prompt the context allows, then a ragged one: a short last chunk over
    nearly the whole context.

    Each chunk after the first attends over the chunks before it, and its tensors grow with
    that context: torch's allocator keeps every outgrown segment, so serving's longest prompt
    grows more segments than vLLM's profile batch (no context; H200, the MoE row: 1.17 GiB
    against 1.04). With a ragged 37-token last chunk the stage measured 0.97 GiB, so the
    longest prompt ends in the largest chunk the context leaves, as a client's does.

    The ragged prompt repeats the longest one's full chunks: where prefix caching is on they
    are a cache hit, and its 37 tokens run in one step over that context (a deployment of
    524,288 tokens would otherwise prefill them twice)."""
    room = s.max_model_len - 8
    chunk = s.max_num_batched_tokens
    longest = max(1, room)
    chunks, last = divmod(longest, chunk)
    if not last:
        chunks, last = chunks - 1, chunk
    out = [
        Wave(
            f"the longest prompt: {chunks} prefill chunks and one of {last}, then decode",
            (Arrival(0, longest, 6, prefix=longest),),
        )
    ]
    # Its shared part ends on a chunk and on a block: prefilled, its last chunk is the 37
    # tokens; cached, the hit (whole blocks) leaves the same 37.
    whole = math.lcm(chunk, s.logical_block)
    shared = max(0, (room - RAGGED) // whole) * whole
    full, ragged = shared // chunk, shared + RAGGED
    if shared and ragged != longest:  # without a full chunk there is no context to reach
        out.append(
            Wave(
                f"a ragged long prompt: the longest one's {full} full chunks and {RAGGED} tokens, "
                "then decode (a prefix-cache hit where caching is on)",
                (Arrival(0, ragged, 6, prefix=shared),),
            )
        )
    return out


def _shape_waves(s: Shape) -> list[Wave]:
    room = s.max_model_len - 8
    chunk = s.max_num_batched_tokens
    out = _long_waves(s)
    classes = sorted(
        {n for n in (*PREFILL_CLASSES, chunk - 1, chunk) if 1 <= n <= min(room, chunk)}
    )
    out += [Wave(f"one prompt of {n}", (Arrival(0, n, 3),)) for n in classes]
    seqs = s.max_num_seqs
    width = 1 + s.spec_tokens
    # Request i needs `width` more tokens than i - 1: one more step even when every draft is
    # accepted, so the decode batch passes every size from seqs down to 1 (each step is
    # eager here, and the key enumeration covers the int classes between the sizes).
    out.append(
        Wave(
            f"{seqs} decodes finishing one by one",
            tuple(Arrival(0, min(room, 16 + 8 * i), 2 + width * i) for i in range(seqs)),
        )
    )
    if seqs >= 2:
        # A prompt's next chunk (it has context) beside a fresh prompt (none) in one step:
        # vLLM then merges attention states and masks the empty context (a kernel of its own,
        # whose LSE head stride is the step's prefill tokens: both sides of 16, as served;
        # the H200 compiled the odd one late when only 800 was here).
        fresh = min(room, 300)
        for rest in (500, 501):
            rest = max(1, min(rest, room - chunk - 4))
            out.append(
                Wave(
                    f"a prompt's second chunk beside a new prompt, {rest + fresh} tokens",
                    (Arrival(0, min(room - 4, chunk + rest), 3), Arrival(1, fresh, 3)),
                )
            )
    out += _dense_prefill_waves(s, room)
    rows = max(1, min(3, seqs - 3))
    # The decode rows outlive the arrivals at steps 2 and 4 even when every draft is accepted.
    mixed = [Arrival(0, min(room, 40 + i), 6 * width) for i in range(rows)]
    if seqs > rows:
        mixed.append(Arrival(2, min(room, 1000), 3))
    if seqs > rows + 2:
        mixed += [
            Arrival(4, min(room, 300), 3),
            Arrival(4, min(room, 701), 3, sampled=s.sampling),
        ]
    out.append(Wave(f"prefills behind {rows} decode row(s), two prompts in one step", tuple(mixed)))
    return out


def _dense_prefill_waves(s: Shape, room: int) -> list[Wave]:
    """Under the DSA indexer, a step whose prompts are all within its top-k runs vLLM's dense
    MLA prefill: a short prompt's next chunk beside a new short prompt then masks the empty
    context (the kernel the H200 compiled late: the waves above are all longer than top-k).
    A filler prompt takes all of step 0's token budget but ``head`` tokens of the short one
    and ends there (one output token), so step 1 holds only the two short prompts."""
    chunk = s.max_num_batched_tokens
    top = min(s.index_topk, room, chunk)
    first = min(top, 200)
    head = max(1, first // 4)
    filler = chunk - head
    if s.index_topk <= 0 or s.max_num_seqs < 3 or first <= head or not 1 <= filler <= room:
        return []
    rest = first - head
    out = []
    for odd in (0, 1):  # the LSE head stride is the step's prefill tokens: both sides of 16
        fresh = min(top, 120)
        fresh -= (rest + fresh) % 16
        fresh = max(1, fresh + odd if fresh + odd <= top else fresh - odd)
        out.append(
            Wave(
                f"a short prompt's next chunk beside a new one (dense prefill under top-k "
                f"{s.index_topk}), {rest + fresh} tokens",
                (Arrival(0, filler, 1), Arrival(0, first, 3), Arrival(1, fresh, 3)),
            )
        )
    return out


def blocks_needed(s: Shape, plan: list[Wave]) -> int:
    """Blocks per rank that hold the largest wave at once, with room to spare."""

    def blocks(a: Arrival) -> int:
        return math.ceil((a.prompt + a.max_tokens + s.spec_tokens + 1) / s.logical_block) + 1

    largest = max(sum(blocks(a) for a in w.arrivals) for w in plan)
    return largest + largest // 4 + 16


def shape_of(worker: Any) -> Shape:
    """The live vLLM config's numbers."""
    config = worker.vllm_config
    spec = config.speculative_config
    return Shape(
        max_model_len=int(config.model_config.max_model_len),
        max_num_batched_tokens=int(config.scheduler_config.max_num_batched_tokens),
        max_num_seqs=int(config.scheduler_config.max_num_seqs),
        spec_tokens=int(read_on("stage.spec_tokens", spec, 0) or 0),
        block_size=int(config.cache_config.block_size),
        dcp=int(config.parallel_config.decode_context_parallel_size),
        capture_sizes=tuple(config.compilation_config.cudagraph_capture_sizes or ()),
        vocab=int(config.model_config.get_vocab_size()),
        index_topk=int(getattr(config.model_config.hf_config, "index_topk", 0) or 0),
        sampling=str(read_on("serving.device_type", config.device_config, "cuda")) != "cpu",
        max_logprobs=live_max_logprobs(config.model_config),
    )


def live_max_logprobs(model_config: Any) -> int:
    """``--max-logprobs`` as vLLM reads it (-1: the vocabulary): the features serve logprob
    counts up to it, each V2 ``TOPK_BLOCK_SIZE`` it reaches (``request_features``)."""
    n = resolve("config.ModelConfig.max_logprobs", on=model_config)
    if isinstance(n, Missing):  # declared ``refuse``: the check before the weights said so
        raise InternalMissing(str(n))
    n = int(n)
    return int(model_config.get_vocab_size()) if n < 0 else n


# ------------------------------------------------------------------ inside a worker


def _prompt(n: int, start: int, vocab: int) -> list[int]:
    span = max(1, vocab - FIRST_ID)
    return [FIRST_ID + (start + i) % span for i in range(n)]


LONGEST_IDS = 1
"""Where the longest prompt's ids start (every other request's start is a multiple of 7919)."""


def prompt_ids(a: Arrival, start: int, vocab: int) -> list[int]:
    """An arrival's prompt: its shared prefix, then ids of its own from ``start``."""
    return _prompt(a.prefix, LONGEST_IDS, vocab) + _prompt(a.prompt - a.prefix, start, vocab)


class _Loop:
    """vLLM's scheduler over the scratch cache, stepped as ``EngineCore.step`` steps it."""

    def __init__(self, worker: Any, kv_cache_config: Any):
        from vllm.v1.core import kv_cache_utils
        from vllm.v1.structured_output import StructuredOutputManager

        self.worker = worker
        config = worker.vllm_config
        # The engine hands its scheduler a config with one spec per group (a group of
        # per-layer specs, such as sparse MLA beside its indexer cache, becomes one of them).
        to_scheduler = resolve("serving.scheduler_kv_config")
        if not isinstance(to_scheduler, Missing):
            kv_cache_config = to_scheduler([kv_cache_config])
        scheduler_cls = config.scheduler_config.get_scheduler_cls()
        block, hash_block = config.cache_config.block_size, None
        block_sizes = resolve("serving.block_sizes")
        if not isinstance(block_sizes, Missing):
            block, hash_block = block_sizes(kv_cache_config, config)
        else:
            block *= config.parallel_config.decode_context_parallel_size
        kwargs = {"hash_block_size": hash_block} if hash_block is not None else {}
        self.scheduler = scheduler_cls(
            vllm_config=config,
            kv_cache_config=kv_cache_config,
            structured_output_manager=StructuredOutputManager(config),
            block_size=block,
            include_finished_set=False,
            log_stats=False,
            **kwargs,
        )
        self.hasher = None
        if config.cache_config.enable_prefix_caching:
            from vllm.utils.hashing import get_hash_fn_by_name

            fn = get_hash_fn_by_name(config.cache_config.prefix_caching_hash_algo)
            kv_cache_utils.init_none_hash(fn)
            self.hasher = kv_cache_utils.get_request_block_hasher(hash_block or block, fn)
        self.async_scheduling = bool(config.scheduler_config.async_scheduling)
        self.spec = config.speculative_config is not None
        shape = shape_of(worker)
        self.vocab = shape.vocab
        self.features = {f.name: f for f in served_features(shape)}
        self.structured: set[str] = set()
        self.queue: collections.deque[tuple[Any, Any]] = collections.deque()
        """Steps run whose output the scheduler has not taken yet (EngineCore's batch queue)."""
        self.steps = 0
        self.tokens = 0

    def add(self, req_id: str, a: Arrival, start: int, vocab: int) -> None:
        from vllm import SamplingParams
        from vllm.v1.request import Request

        copies = 1
        if a.feature:
            feature = self.features[a.feature]
            kwargs = feature.sampling_kwargs()
            copies = int(kwargs.pop("n", 1))  # the API fans n out into n engine requests
            params = SamplingParams(max_tokens=a.max_tokens, **kwargs)
            if feature.bad_words:  # the ids the API's tokenizer would give those words
                params._bad_words_token_ids = [[FIRST_ID + 3, FIRST_ID + 4]]
            if feature.structured:
                self.structured.add(req_id)
        elif a.sampled:
            params = SamplingParams(
                max_tokens=a.max_tokens, temperature=0.8, top_p=0.9, top_k=20, seed=7
            )
        else:
            params = SamplingParams(max_tokens=a.max_tokens, temperature=0.0)
        params.ignore_eos = True
        for copy in range(copies):
            rid = req_id if copy == 0 else f"{req_id}-{copy}"
            if rid != req_id and req_id in self.structured:
                self.structured.add(rid)
            request = Request(
                request_id=rid,
                prompt_token_ids=prompt_ids(a, start, vocab),
                sampling_params=params,
                pooling_params=None,
                block_hasher=self.hasher,
            )
            self.scheduler.add_request(request)

    def grammar(self, so: Any) -> Any:
        """The scheduler's grammar bitmask, or, for the stage's structured rows, one that
        allows every token (xgrammar's bitmask kernel runs as a grammar would make it run;
        no grammar is compiled)."""
        import numpy as np
        from vllm.v1.core.sched.output import GrammarOutput

        ids = [r for r in so.num_scheduled_tokens if r in self.structured]
        if not ids:
            return self.scheduler.get_grammar_bitmask(so)
        spec = so.scheduled_spec_decode_tokens
        rows = sum(1 + len(spec.get(r, ())) for r in ids)
        words = (self.vocab + 31) // 32
        return GrammarOutput(ids, np.full((rows, words), -1, dtype=np.int32))

    def step(self) -> None:
        """One step as ``EngineCore`` takes it. Under async scheduling (its batch queue of
        two) the next batch is scheduled and run before the last one's output is taken: the
        runner then corrects in-flight drafts' positions on a path of its own (a
        ``torch.compile``d kernel the H200 compiled late when the stage stepped in lockstep)."""
        if self.scheduler.has_requests():
            so = self.scheduler.schedule()
            output = self.worker.execute_model(so)
            if output is None:
                output = self.worker.sample_tokens(self.grammar(so))
            self.queue.appendleft((so, output))
            self.steps += 1
            self.tokens += so.total_num_scheduled_tokens
            if self.async_scheduling and len(self.queue) < 2 and self.scheduler.has_requests():
                return
        if not self.queue:
            return
        so, output = self.queue.pop()
        if hasattr(output, "get_output"):  # async scheduling's output
            output = output.get_output()
        self.scheduler.update_from_output(so, output)
        if self.spec and not self.async_scheduling and so.total_num_scheduled_tokens > 0:
            drafts = self.worker.take_draft_token_ids()
            if drafts is not None:
                self.scheduler.update_draft_token_ids(drafts)

    def abandon(self) -> None:
        """After a failed step: end every request, as ``EngineCore`` aborts them, and take one
        step of no tokens, which hands their ends to the runner (it drops them)."""
        from vllm.v1.request import RequestStatus

        self.queue.clear()
        self.scheduler.finish_requests(None, RequestStatus.FINISHED_ABORTED)
        self.structured.clear()
        so = self.scheduler.schedule()
        self.worker.execute_model(so)

    def run(self, wave: Wave, n: int, vocab: int, max_steps: int) -> list[float]:
        """Serve wave ``n``; every rank builds the same ids (no salted hash), so
        tensor-parallel ranks schedule the same steps. Returns each step's seconds."""
        pending = sorted(enumerate(wave.arrivals), key=lambda ia: ia[1].step)
        step, took = 0, []
        while pending or self.scheduler.has_requests() or self.queue:
            while pending and pending[0][1].step <= step:
                i, a = pending.pop(0)
                self.add(f"b12x-launch-scratch-{n}-{i}", a, 7919 * (64 * n + i + 1), vocab)
            # The first wave's first step holds vLLM's torch.compile: its later steps apart.
            if n == 0:
                thread_samples.mark("wave 0 step 0" if step == 0 else "wave 0 steps 1+")
            t0 = time.perf_counter()
            self.step()
            took.append(time.perf_counter() - t0)
            step += 1
            if step > max_steps:
                raise RuntimeError(f"wave {wave.name!r} did not finish in {max_steps} steps")
        return took


def serve(
    worker: Any,
    kv_cache_config: Any,
    plan: list[Wave],
    log: Callable[[str], None],
    after_wave: Callable[[], Any] | None = None,
) -> str:
    """Serve every wave through vLLM's scheduler and the worker, calling ``after_wave`` after
    each (the early key enumeration); a one-line account."""
    loop = _Loop(worker, kv_cache_config)
    vocab = shape_of(worker).vocab
    failed: list[str] = []
    for n, wave in enumerate(plan):
        t0, steps = time.perf_counter(), loop.steps
        thread_samples.mark(f"wave {n}")
        phases.part("waves", n, len(plan))
        try:
            steps_took = loop.run(wave, n, vocab, max_steps=4096)
        except Exception as exc:
            # The waves after it still run (their kernels would otherwise compile after
            # sizing); where vLLM cannot take its requests back, the stage stops here.
            try:
                loop.abandon()
            except Exception:
                raise exc from None
            failed.append(f"wave {n} ({wave.name}): {type(exc).__name__}: {exc}")
            log(
                f"scratch KV: wave {n} FAILED and was abandoned, the waves after it go on: "
                f"{failed[-1]}"
            )
            continue
        took = time.perf_counter() - t0  # per wave: where boot 1's minutes go (issue 39's 1.2x)
        log(
            f"scratch KV: served wave {n} in {took:.1f}s, {loop.steps - steps} steps"
            f"{_slow_steps(steps_took)}, {wave.name}"
        )
        if after_wave is not None:
            after_wave()
    if failed:  # the entry point's status: failed, naming each wave, after every wave ran
        raise RuntimeError(f"{len(failed)} of {len(plan)} waves failed: " + "; ".join(failed))
    return f"{len(plan)} waves, {loop.steps} scheduler steps, {loop.tokens:,} tokens"


def _slow_steps(took: list[float], floor: float = 0.5) -> str:
    """The wave's steps of at least ``floor`` seconds, slowest first (at most three)."""
    slow = sorted(((t, i) for i, t in enumerate(took) if t >= floor), reverse=True)[:3]
    return ", slowest: " + ", ".join(f"step {i} {t:.1f}s" for t, i in slow) if slow else ""


def capture_shapes(worker: Any) -> str:
    """The runner's own dummy batches of vLLM's CUDA-graph capture, eager: a uniform decode
    at every capture size and a mixed batch."""
    from vllm.config import CUDAGraphMode

    runner = worker.model_runner
    s = shape_of(worker)
    sizes = sorted(n for n in s.capture_sizes if n <= runner.max_num_tokens)
    for n in sizes:
        runner._dummy_run(
            n,
            cudagraph_runtime_mode=CUDAGraphMode.NONE,
            force_attention=True,
            uniform_decode=True,
        )
    mixed = min(runner.max_num_tokens, max(2, s.max_num_batched_tokens // 2))
    runner._dummy_run(
        mixed,
        cudagraph_runtime_mode=CUDAGraphMode.NONE,
        create_mixed_batch=True,
        force_attention=True,
    )
    return f"uniform decode at {sizes}, a mixed batch of {mixed} tokens"


def sampler_warmup(worker: Any, sampler_run: Callable[[Any], Any]) -> str:
    """vLLM's own sampler warmup, as its V1 worker runs it after sizing: a dummy batch of
    ``min(max_num_seqs, max_num_batched_tokens)`` one-token rows, eager and without EPLB's
    bookkeeping, then ``sampler_run`` (the runner's dummy sampler run) on the rows it samples:
    the sampler and, under speculative decoding, the rejection sampler on vLLM's dummy
    metadata (every row sampled at top-k and top-p, top-k an int64 tensor)."""
    from vllm.config import CUDAGraphMode

    config = worker.vllm_config.scheduler_config
    rows = min(int(config.max_num_seqs), int(config.max_num_batched_tokens))
    _, sampled = worker.model_runner._dummy_run(
        num_tokens=rows, skip_eplb=True, cudagraph_runtime_mode=CUDAGraphMode.NONE
    )
    sampler_run(sampled)
    return f"the runner's dummy sampler run on {rows} rows"
