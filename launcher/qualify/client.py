"""Drive a workload through the server's OpenAI API on loopback (stdlib only).

Each request is a ``/v1/completions`` call with the prompt as token ids, a fixed number
of output tokens (``ignore_eos``, ``min_tokens``) and greedy sampling; ``concurrency``
threads keep that many in flight. The whole run is bounded by the workload's time:
what has not finished by then counts as failed.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from launcher.qualify.workload import RequestSpec, Workload, prompt_ids

LOOPBACK = "127.0.0.1"


@dataclass
class Outcome:
    index: int
    ok: bool
    seconds: float
    output_tokens: int = 0
    error: str = ""


@dataclass
class WorkloadResult:
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    timed_out: bool = False

    @property
    def done(self) -> int:
        return sum(o.ok for o in self.outcomes)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]

    def to_dict(self) -> dict[str, Any]:
        return {
            "completed": self.done,
            "failed": len(self.failed),
            "errors": sorted({o.error for o in self.failed})[:10],
            "output_tokens": sum(o.output_tokens for o in self.outcomes),
            "seconds": round(self.seconds, 2),
            "timed_out": self.timed_out,
        }


def health(port: int, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/health", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def complete(
    port: int, model: str, spec: RequestSpec, vocab: int, timeout: float
) -> tuple[int, str]:
    """One completion; (output tokens, error text or "")."""
    body = {
        "model": model,
        "prompt": prompt_ids(spec, vocab),
        "max_tokens": spec.output_tokens,
        "min_tokens": spec.output_tokens,
        "ignore_eos": True,
        "temperature": 0,
    }
    req = urllib.request.Request(
        f"http://{LOOPBACK}:{port}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=max(1.0, timeout)) as r:
            reply = json.loads(r.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode(errors="replace")
        return 0, f"HTTP {exc.code}: {detail}"
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, ValueError) as exc:
        return 0, f"{type(exc).__name__}: {exc}"
    return int(reply.get("usage", {}).get("completion_tokens", 0)), ""


def run_workload(
    port: int,
    model: str,
    workload: Workload,
    vocab: int,
    on_outcome: Callable[[Outcome], None] = lambda o: None,
    alive: Callable[[], bool] = lambda: True,
) -> WorkloadResult:
    """Run every request, ``workload.concurrency`` at a time, within ``max_seconds``.

    ``alive`` is polled between requests: once the server has died nothing more is sent.
    """
    todo: queue.Queue[RequestSpec] = queue.Queue()
    for spec in workload.requests:
        todo.put(spec)
    result = WorkloadResult()
    lock = threading.Lock()
    start = time.monotonic()
    deadline = start + workload.max_seconds
    closed = threading.Event()

    def worker() -> None:
        while True:
            try:
                spec = todo.get_nowait()
            except queue.Empty:
                return
            left = deadline - time.monotonic()
            began = time.monotonic()
            if left <= 0 or not alive():
                why = "out of time" if left <= 0 else "the server is gone"
                outcome = Outcome(spec.index, False, 0.0, error=f"not sent: {why}")
            else:
                tokens, error = complete(port, model, spec, vocab, left)
                ok = not error and tokens >= spec.output_tokens
                if not error and not ok:
                    error = f"{tokens} of {spec.output_tokens} output tokens"
                outcome = Outcome(spec.index, ok, time.monotonic() - began, tokens, error)
            with lock:
                if closed.is_set():  # past the deadline: already counted as failed
                    return
                result.outcomes.append(outcome)
            on_outcome(outcome)

    threads = [
        threading.Thread(target=worker, name=f"qualify-client-{i}", daemon=True)
        for i in range(workload.concurrency)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()) + 5.0)
    result.seconds = time.monotonic() - start
    result.timed_out = any(t.is_alive() for t in threads) or result.seconds > workload.max_seconds
    with lock:
        closed.set()
        seen = {o.index for o in result.outcomes}
        for spec in workload.requests:
            if spec.index not in seen:
                result.outcomes.append(Outcome(spec.index, False, 0.0, error="out of time"))
    return result
