"""``b12x-launch sweep``: every combination of a few settings, planned without a GPU.

Each row is ``pipeline.make_plan`` of the profile loaded with its ``--set`` overrides (the
loop is ``pipeline.run_sweep``), so a row holds exactly what the dry run of the same
settings prints, calibration and qualified records included. Here: the rows, the
combinations, and the search for the longest ``max_model_len`` that fits.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from launcher.errors import Issue
from launcher.plan.planner import MemoryPlan, PlanInputs, plan_without_suggestions
from launcher.profile import Profile
from launcher.profile.load import names_a_secret

MAX_COMBINATIONS = 10_000
MAX_MODEL_LEN = 1 << 26
"""The schema's ceiling on serving.max_model_len."""


@dataclass(frozen=True)
class Row:
    """One combination: its settings and either its plan or why the settings are invalid."""

    settings: tuple[tuple[str, str], ...]
    """(key, value as given on the command line), in --vary order."""
    plan: MemoryPlan | None = None
    fingerprint: str = ""
    longest: int = 0
    """The largest serving.max_model_len that fits, everything else as set (0: none)."""
    errors: tuple[Issue, ...] = ()
    """The profile errors the dry run would report (the row has no plan)."""

    @property
    def status(self) -> str:
        if self.plan is None:
            return "invalid"
        return "fits" if self.plan.fits else "does_not_fit"


@dataclass(frozen=True)
class Sweep:
    profile: str
    keys: tuple[str, ...]
    rows: tuple[Row, ...]
    gathered: int
    """How many times the facts were gathered (the rest re-used them)."""


def parse_vary(spec: str) -> tuple[str, tuple[str, ...]]:
    """``KEY=V1,V2,...`` -> (KEY, values); commas inside [] or {} stay in the value.

    Raises:
        ValueError: with what is wrong, for the command line to report.
    """
    key, sep, rest = spec.partition("=")
    key = key.strip()
    if not sep or not key or key.startswith("~"):
        raise ValueError(f"expected KEY=V1,V2,... (got {spec!r})")
    values, depth, start = [], 0, 0
    for i, ch in enumerate(rest):
        depth += (ch in "[{") - (ch in "]}")
        if ch == "," and depth == 0:
            values.append(rest[start:i].strip())
            start = i + 1
    values.append(rest[start:].strip())
    if any(names_a_secret(f"{key}={v}") for v in values):
        # each row prints its settings: a secret's values would be on screen and in the JSON
        raise ValueError(
            f"{key}: a value names a secret (its key, or a key inside it): no plan depends on "
            "it, and every row would print it; pass it in the environment"
        )
    if any(not v for v in values):
        raise ValueError(f"{key}: an empty value in {rest!r}")
    return key, tuple(values)


def combinations(vary: list[tuple[str, tuple[str, ...]]]) -> list[tuple[tuple[str, str], ...]]:
    """Every combination, the first --vary key slowest.

    Raises:
        ValueError: a key varied twice, or more than MAX_COMBINATIONS combinations.
    """
    keys = [k for k, _ in vary]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ValueError(f"{', '.join(twice)} varied more than once; give all values in one --vary")
    count = 1
    for _, values in vary:
        count *= len(values)
    if count > MAX_COMBINATIONS:
        raise ValueError(f"{count:,} combinations; at most {MAX_COMBINATIONS:,}")
    return [
        tuple(zip(keys, values, strict=True)) for values in itertools.product(*(v for _, v in vary))
    ]


def longest_model_len(p: Profile, inputs: PlanInputs, current: MemoryPlan) -> int:
    """The largest serving.max_model_len at which ``plan()`` fits, all else as set (0: none).

    Searched with the planner itself. A longer context never needs less memory (more
    blocks per request, larger indexer pages), so the KV tokens of a plan that fits bound
    every longer one: the first guess is that bound, and bisection settles the rest.
    Capped by what a profile may ask: the model's max_position_embeddings and, without
    chunked prefill, max_num_batched_tokens.
    """
    cap = MAX_MODEL_LEN
    if inputs.facts.max_position:
        cap = min(cap, inputs.facts.max_position)
    if not p.serving.enable_chunked_prefill:
        cap = min(cap, p.serving.max_num_batched_tokens)

    def at(length: int) -> MemoryPlan:
        serving = p.serving.model_copy(update={"max_model_len": length})
        trial = p.model_copy(update={"serving": serving})
        # max_model_len is a key no derived value reads: the same deployment, relabelled.
        deployment = inputs.deployment.with_profile(trial)
        return plan_without_suggestions(trial, replace(inputs, deployment=deployment))

    low, high = 0, min(cap, p.serving.max_model_len - 1)
    if current.fits:
        low, high = p.serving.max_model_len, min(cap, current.kv.tokens)
    else:
        guess = min(high, current.kv.tokens)  # where the planner's own suggestion starts
        if guess > 0 and (trial := at(guess)).fits:
            low, high = guess, min(high, trial.kv.tokens)
    if low < high and at(high).fits:
        return high
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if at(mid).fits else (low, mid - 1)
    return low


def fitting(sweep: Sweep) -> list[Row]:
    return [r for r in sweep.rows if r.plan is not None and r.plan.fits]
