"""Request failures that are vLLM's own, named, each matched by its line in the server's log.

Under speculative decoding vLLM 0.26's scheduler ends a request under a grammar when the token
it accepted is one the grammar rejects, token 0: ``grammar rejected tokens [0] ... Terminating
request``, answered HTTP 500. It was seen on GLM (MTP, 2 tokens) on the H100 before the
reserves were held (2026-12-06, at 9de033a) and after (b255a9a), once in 48 requests, on
neither run of the same seed in between; it is not yet shown on plain vLLM. A failure counts
as this fault only when the deployment speculates, the request had a grammar, it was answered
500, and the log has one such line for each such failure; every other failure is the
launcher's to explain.
"""

from __future__ import annotations

import re
from typing import Any

GRAMMAR = ("structured_outputs", "response_format")
LINE = re.compile(r"grammar rejected tokens \[0\] for request \S+\. Terminating request")


def speculates(plan: dict[str, Any]) -> bool:
    argv = (plan.get("vllm") or {}).get("argv") or []
    return any(a.startswith("--speculative-config") or a == "--speculative-config" for a in argv)


def split(failed: list[str], log: str, plan: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The failures that are vLLM's named fault, and the rest."""
    if not speculates(plan):
        return [], list(failed)
    lines = len(LINE.findall(log))
    own, other = [], []
    for f in failed:
        grammar = any(g in f for g in GRAMMAR) and f.endswith("HTTP 500")
        if grammar and len(own) < lines:
            own.append(f)
        else:
            other.append(f)
    return own, other
