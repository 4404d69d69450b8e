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


@dataclass
class Outcome:
    ok: int = 0
    failed: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
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


def run(w: Workload, devices: list[int]) -> Outcome:
    """Both waves, free memory of ``devices`` sampled every 20 ms meanwhile."""
    out = Outcome()
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

    memory, shapes = requests(w)
    with Sampler(devices) as sampler:
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
