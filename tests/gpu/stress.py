"""A bounded stress workload over loopback, with physical free memory sampled throughout.

Two waves against ``http://127.0.0.1:PORT``:

1. memory: the longest prompt the model allows (max_model_len minus a few output tokens,
   so the scheduler splits it into max_num_batched_tokens chunks) together with
   max_num_seqs concurrent decodes;
2. shapes: prompts of sizes no warmup runs (a prefill of each size is one token count
   for the MoE kernels), one at a time, a couple of tokens each.

Bounded in count (1 + max_num_seqs + len(SHAPES) requests) and in time (``deadline``).
Prompts are token ids (the generated tokenizers are word-level, ids 4.. are words) and each
request starts at a different id, so prefix caching shares nothing.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field

from tests.gpu.nvml import Sampler

SHAPES = (3, 37, 99, 250, 613, 1100, 1901)
"""Prompt lengths of the shapes wave: odd sizes in several token-count buckets."""
FIRST_ID = 4  # after <pad> <s> </s> <unk>


@dataclass(frozen=True)
class Workload:
    url: str
    model: str
    max_model_len: int
    max_num_seqs: int
    vocab: int
    out_tokens: int = 4
    decode_tokens: int = 128
    deadline: float = 120.0
    request_timeout: float = 90.0
    spec_tokens: int = 0
    """MTP tokens the deployment drafts (the API refuses some features with them)."""
    max_num_batched_tokens: int = 2048
    """The prefill chunk (the users workload asks prompt logprobs over two)."""
    seed: int | None = None
    """The users workload's seed where ``GPU_TIER_SEED`` names none (None: drawn)."""


@dataclass
class Outcome:
    sent: int = 0
    ok: int = 0
    failed: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    seed: int | None = None
    """The generated workload's seed (``users``; None: a fixed workload)."""
    coverage: dict[str, int] = field(default_factory=dict)
    """Requests per optional field sent (``users``)."""
    low_free: dict[int, int] = field(default_factory=dict)
    """NVML device index -> lowest free bytes seen while the workload ran."""
    samples: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def prompt(n: int, start: int, vocab: int) -> list[int]:
    """``n`` token ids from ``start`` on, wrapping inside the word range."""
    span = vocab - FIRST_ID
    return [FIRST_ID + (start + i) % span for i in range(n)]


def complete(w: Workload, ids: list[int], max_tokens: int, timeout: float) -> dict:
    body = {
        "model": w.model,
        "prompt": ids,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
    }
    req = urllib.request.Request(
        f"{w.url}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def requests(w: Workload) -> tuple[list[tuple[list[int], int]], list[tuple[list[int], int]]]:
    """The two waves as (prompt ids, max tokens)."""
    longest = w.max_model_len - w.out_tokens
    memory = [(prompt(longest, 0, w.vocab), w.out_tokens)]
    for i in range(w.max_num_seqs):
        memory.append((prompt(16 + 8 * i, 1009 * (i + 1), w.vocab), w.decode_tokens))
    shapes = [(prompt(n, 7919 * (j + 1), w.vocab), 2) for j, n in enumerate(SHAPES)]
    return memory, shapes


KINDS = ("mixed", "qualify", "stream", "features", "users")
"""The tier's workloads: ``mixed`` (the two waves above), ``qualify`` (qualify's own worst
case for the profile), ``stream`` (one long streamed generation, MTP drafting, beside
``max_num_seqs`` concurrent short prompts arriving while it decodes) and ``features`` (every
request feature the API accepts at 1, 8 and max_num_seqs rows, streamed and not; each one it
refuses, once, expecting HTTP 400), ``users`` (``tests.gpu.traffic``: requests generated from
vLLM's own request model, max_num_seqs at a time, seeded)."""
STREAM_TOKENS = 512


def qualify_requests(w: Workload, profile_path) -> list[tuple[list[int], int]]:
    from launcher.profile import load_profile
    from launcher.qualify.workload import prompt_ids, worst_case

    p = load_profile(profile_path).profile
    return [(prompt_ids(r, w.vocab), r.output_tokens) for r in worst_case(p).requests]


def stream(w: Workload, ids: list[int], max_tokens: int, timeout: float) -> int:
    """One streamed completion; the number of chunks read."""
    body = {
        "model": w.model,
        "prompt": ids,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
    }
    req = urllib.request.Request(
        f"{w.url}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    chunks = 0
    with urllib.request.urlopen(req, timeout=timeout) as r:
        for line in r:
            if code := _stream_error(line):  # a failure after the 200: not a chunk
                raise ValueError(f"error event in the stream after {chunks} chunks: HTTP {code}")
            if line.startswith(b"data: ") and not line.startswith(b"data: [DONE]"):
                chunks += 1
    return chunks


def run(w: Workload, devices: list[int], kind: str = "mixed", profile_path=None) -> Outcome:
    """The workload ``kind``, free memory of ``devices`` sampled every 20 ms meanwhile."""
    if kind == "features":
        return _features(w, devices, profile_path)
    if kind == "users":
        return _users(w, devices)
    if kind == "qualify":
        return _concurrent(w, devices, qualify_requests(w, profile_path), [])
    if kind == "stream":
        return _streaming(w, devices)
    memory, shapes = requests(w)
    return _concurrent(w, devices, memory, shapes)


def _streaming(w: Workload, devices: list[int]) -> Outcome:
    out = Outcome()
    start = time.monotonic()
    short = [(prompt(5 + 3 * i, 31 * (i + 1), w.vocab), 24) for i in range(w.max_num_seqs)]
    streamed: list[int] = []

    def long_one() -> None:
        try:
            streamed.append(stream(w, prompt(300, 17, w.vocab), STREAM_TOKENS, w.deadline))
        except (urllib.error.URLError, OSError, ValueError) as exc:
            out.failed.append(f"streamed request: {exc}")

    with Sampler(devices) as sampler:
        t = threading.Thread(target=long_one, daemon=True)
        t.start()
        time.sleep(1.0)  # the long one is decoding when the short ones arrive
        inner = _concurrent(w, [], short, [], sample=False)
        t.join(timeout=max(0.0, w.deadline - (time.monotonic() - start)))
    out.sent, out.ok = inner.sent + 1, inner.ok + (1 if streamed else 0)
    out.failed += inner.failed
    out.prompt_tokens, out.completion_tokens = inner.prompt_tokens, inner.completion_tokens
    out.completion_tokens += streamed[0] if streamed else 0
    out.seconds = time.monotonic() - start
    out.low_free, out.samples = dict(sampler.low), sampler.samples
    return out


def _concurrent(
    w: Workload,
    devices: list[int],
    memory: list[tuple[list[int], int]],
    shapes: list[tuple[list[int], int]],
    sample: bool = True,
) -> Outcome:
    """``memory`` at once, then ``shapes`` one by one."""
    out = Outcome(sent=len(memory) + len(shapes))
    lock = threading.Lock()
    start = time.monotonic()

    def one(ids: list[int], max_tokens: int) -> None:
        left = w.deadline - (time.monotonic() - start)
        if left <= 1:
            with lock:
                out.failed.append(f"{len(ids)} tokens: not sent, past the deadline")
            return
        try:
            usage = complete(w, ids, max_tokens, min(left, w.request_timeout)).get("usage", {})
        except (urllib.error.URLError, OSError, ValueError) as exc:
            detail = exc.read().decode(errors="replace")[:300] if hasattr(exc, "read") else ""
            with lock:
                out.failed.append(f"{len(ids)} tokens: {exc} {detail}".strip())
            return
        with lock:
            out.ok += 1
            out.prompt_tokens += int(usage.get("prompt_tokens", 0))
            out.completion_tokens += int(usage.get("completion_tokens", 0))

    with Sampler(devices if sample else []) as sampler:
        threads = [threading.Thread(target=one, args=r, daemon=True) for r in memory]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(0.0, w.deadline - (time.monotonic() - start)))
        for r in shapes:
            one(*r)
    out.seconds = time.monotonic() - start
    out.low_free, out.samples = dict(sampler.low), sampler.samples
    return out


# ------------------------------------------------------------------ the features workload


def feature_batches(w: Workload, spec_tokens: int) -> list[tuple[str, list[dict]]]:
    """(label, request bodies) per batch: each accepted feature alone, at 8 rows streamed, then
    every feature side by side in batches of max_num_seqs rows, streamed and not."""
    from launcher.vllm import request_features

    accepted = [f for f in request_features.accepted(spec_tokens) if f.group != "streaming"]
    out: list[tuple[str, list[dict]]] = []
    n = 0

    def body(f, stream: bool) -> dict:
        nonlocal n
        n += 1
        extra = dict(f.body)
        if f.bad_words:
            extra["bad_words"] = list(f.bad_words)
        return {
            "model": w.model,
            "prompt": prompt(16 + n % 29, 7907 * n, w.vocab),
            "max_tokens": 4,
            # Not with a grammar: a choice ends in 1-2 tokens, and vLLM (0.26, plain too) ends
            # a request that samples past its finished grammar with an internal error.
            **({} if f.structured else {"ignore_eos": True}),
            **extra,
            **({"stream": True} if stream else {}),
        }

    for f in accepted:
        out.append((f"{f.name} x1", [body(f, False)]))
        label = f"{f.name} x8" + (" streamed" if f.streams else "")
        out.append((label, [body(f, f.streams) for _ in range(8)]))
    for stream in (False, True):
        usable = [f for f in accepted if f.streams or not stream]
        for start in range(0, len(usable), w.max_num_seqs):
            group = usable[start : start + w.max_num_seqs]
            rows = [body(group[i % len(group)], stream) for i in range(w.max_num_seqs)]
            out.append((f"{len(group)} features x{w.max_num_seqs}", rows))
    return out


def refused_bodies(w: Workload, spec_tokens: int) -> list[tuple[str, dict]]:
    from launcher.vllm import request_features

    base = {"model": w.model, "prompt": prompt(8, 13, w.vocab), "max_tokens": 2}
    out = [
        (f.name, {**base, **f.body})
        for f in request_features.features(spec_tokens)
        if not f.accepted
    ]
    out += [
        (f"{f.name} streamed", {**base, **f.body, "stream": True})
        for f in request_features.accepted(spec_tokens)
        if not f.streams
    ]
    return out


def post(w: Workload, body: dict, timeout: float) -> int:
    """Send one completion (reading a stream to its end); the HTTP status."""
    req = urllib.request.Request(
        f"{w.url}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            errors = [_stream_error(line) for line in r] if body.get("stream") else []
            return next((code for code in errors if code), r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _stream_error(line: bytes) -> int:
    """A stream's error event (vLLM sends ``data: {"error": {..., "code": N}}`` after its 200
    when a request fails mid-generation); 0 for any other line."""
    if not line.startswith(b"data: {"):
        return 0
    try:
        event = json.loads(line[len(b"data: ") :])
    except ValueError:
        return 0
    error = event.get("error") if isinstance(event, dict) else None
    if not isinstance(error, dict):
        return 0
    code = error.get("code")
    return code if isinstance(code, int) and code >= 400 else 500


def _features(w: Workload, devices: list[int], profile_path) -> Outcome:
    spec = w.spec_tokens
    out = Outcome()
    start = time.monotonic()
    lock = threading.Lock()

    def one(label: str, body: dict, expect: int) -> None:
        left = w.deadline - (time.monotonic() - start)
        status = post(w, body, min(max(left, 1.0), w.request_timeout)) if left > 1 else 0
        with lock:
            out.sent += 1
            if status == expect:
                out.ok += 1
            else:
                out.failed.append(f"{label}: HTTP {status}, expected {expect}")

    with Sampler(devices) as sampler:
        for label, bodies in feature_batches(w, spec):
            threads = [
                threading.Thread(target=one, args=(label, b, 200), daemon=True) for b in bodies
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=max(0.0, w.deadline - (time.monotonic() - start)))
        for label, body in refused_bodies(w, spec):
            one(f"{label} (refused)", body, 400)
    out.seconds = time.monotonic() - start
    out.low_free, out.samples = dict(sampler.low), sampler.samples
    return out


# ------------------------------------------------------------------ the users workload


def users_seed(w: Workload) -> int:
    """``GPU_TIER_SEED`` where it names one, else the boot's (``Workload.seed``), else drawn."""
    import os
    import random

    named = os.environ.get("GPU_TIER_SEED")
    if named:
        return int(named)
    return w.seed if w.seed is not None else random.SystemRandom().randrange(1 << 31)


def _users(w: Workload, devices: list[int]) -> Outcome:
    """``tests.gpu.traffic``'s generated requests, ``max_num_seqs`` in flight at once; its seed
    from ``users_seed``, printed."""
    import queue

    from tests.gpu import traffic

    seed = users_seed(w)
    print(f"users workload: seed {seed} (GPU_TIER_SEED={seed} sends the same requests)")
    fields = traffic.protocol_fields()
    missing = traffic.unplaced(fields)
    shape = traffic.Shape(
        w.max_model_len, w.max_num_seqs, w.max_num_batched_tokens, w.vocab, w.spec_tokens
    )
    reqs = traffic.generate(shape, seed, 6 * w.max_num_seqs, fields)
    out = Outcome(seed=seed, coverage=traffic.coverage(reqs))
    out.failed += [f"field {f} of vLLM's request model is not placed" for f in missing]
    start = time.monotonic()
    lock = threading.Lock()
    todo: queue.Queue = queue.Queue()
    for r in reqs:
        todo.put(r)

    def worker() -> None:
        while True:
            try:
                r = todo.get_nowait()
            except queue.Empty:
                return
            left = w.deadline - (time.monotonic() - start)
            body = {"model": w.model, **r.body}
            status = post(w, body, min(max(left, 1.0), w.request_timeout)) if left > 1 else 0
            with lock:
                out.sent += 1
                if status == 200:
                    out.ok += 1
                else:
                    out.failed.append(f"{r.label}: HTTP {status}")

    with Sampler(devices) as sampler:
        threads = [threading.Thread(target=worker, daemon=True) for _ in range(w.max_num_seqs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(0.0, w.deadline - (time.monotonic() - start)))
    out.seconds = time.monotonic() - start
    out.low_free, out.samples = dict(sampler.low), sampler.samples
    return out
