"""``b12x-launch sweep``: plan every combination of a few settings, without a GPU.

Each combination is the profile loaded with its ``--set`` overrides and planned by
``plan()`` itself, so a row holds exactly what the dry run of the same settings prints.
What makes it fast is that the facts (model, GPU kind, weights per rank) are gathered
once per distinct value of the keys they depend on, not once per combination.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, replace

from launcher.deployment import Deployment, resolve
from launcher.errors import Issue, ProfileError
from launcher.plan.fingerprint import profile_fingerprint
from launcher.plan.inputs import check_against_facts, gather
from launcher.plan.planner import Measured, MemoryPlan, PlanInputs, plan, plan_without_suggestions
from launcher.profile import LoadedProfile, Profile
from launcher.profile.load import names_a_secret, read_profile

MAX_COMBINATIONS = 10_000
# Keys gather() does not read (only the planner does), so varying them re-uses the facts.
# Every other key counts as one the facts depend on: a key gather() starts reading later
# costs a second gather, never a wrong row.
PLAN_ONLY = (
    ("name",),
    ("description",),
    ("hardware", "memory"),
    ("hardware", "reserved_by_others"),
    ("parallel", "decode_context"),
    ("parallel", "interleave"),
    ("parallel", "dcp_comm_backend"),
    ("parallel", "replicate_indexer_cache"),
    ("parallel", "replicate_draft_cache"),
    ("speculative", "tokens"),  # the weights change only with MTP on or off (kept as _mtp)
    ("serving",),  # gather() checks max_model_len and the KV dtype: re-checked for each row
    ("memory",),
    ("prewarm",),
    ("runtime",),
)
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


def run_sweep(
    path: str,
    overrides: tuple[str, ...],
    vary: list[tuple[str, tuple[str, ...]]],
    *,
    calibrate: bool = True,
) -> Sweep:
    """Plan every combination of ``vary`` on top of ``path`` and ``overrides``.

    Raises:
        ProfileError: the file cannot be read, or every combination is invalid.
    """
    document = read_profile(path)  # the YAML is read once, validated per combination
    facts = _Facts(calibrate)
    rows = []
    for combo in combinations(vary):
        sets = (*overrides, *((f"{k}={v}", "--vary") for k, v in combo))
        try:
            loaded = document.load(sets)
            # Each combination is a deployment of its own (capture sizes, the line...).
            inputs = facts.inputs(loaded, resolve(loaded.profile))
        except ProfileError as exc:
            rows.append(Row(combo, errors=tuple(exc.issues)))
            continue
        rows.append(_planned_row(combo, loaded, inputs, facts))
    if rows and all(r.plan is None for r in rows):
        raise ProfileError(list(rows[0].errors))
    return Sweep(path, tuple(k for k, _ in vary), tuple(rows), facts.gathered)


def _planned_row(
    combo: tuple[tuple[str, str], ...], loaded: LoadedProfile, inputs: PlanInputs, facts: _Facts
) -> Row:
    # As pipeline.make_plan: the fingerprint picks this combination's calibration records.
    fingerprint = profile_fingerprint(loaded.profile)
    inputs = replace(inputs, measured=facts.measured(loaded.profile, fingerprint))
    memory_plan = plan(loaded.profile, inputs)
    longest = longest_model_len(loaded.profile, inputs, memory_plan)
    return Row(combo, memory_plan, fingerprint, longest)


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


class _Facts:
    """The gathered facts, keyed by what ``gather()`` reads to find them, and the package
    versions that calibration records are checked against (looked up once)."""

    def __init__(self, calibrate: bool) -> None:
        self._cache: dict[str, PlanInputs] = {}
        self._calibrate = calibrate
        self._versions: dict[str, str | None] | None = None
        self.gathered = 0

    def inputs(self, loaded: LoadedProfile, deployment: Deployment) -> PlanInputs:
        """The facts for ``loaded``, with its own ``deployment``."""
        key = _fact_key(loaded.profile)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = gather(loaded, deployment)
            self.gathered += 1
            return cached
        # gather() refuses settings the model cannot take; so must a re-use.
        check_against_facts(loaded, cached.facts, cached.gpu, deployment.runtime)
        return replace(cached, deployment=deployment)

    def measured(self, p: Profile, fingerprint: str) -> dict[int, Measured]:
        """The calibration records the dry run of this combination would read."""
        if not self._calibrate:
            return {}
        from launcher.plan.calibration import load_measured, stack_versions, store_dir

        if not store_dir(p, fingerprint).is_dir():
            return {}
        if self._versions is None:
            self._versions = stack_versions()
        return load_measured(p, fingerprint, versions=self._versions)


def _fact_key(p: Profile) -> str:
    """The profile less the keys only the planner reads: two combinations with the same key
    have the same facts."""
    data = p.model_dump(mode="json")
    for path in PLAN_ONLY:
        node = data
        for key in path[:-1]:
            node = node.get(key, {})
        node.pop(path[-1], None)
    data["_mtp"] = p.mtp_tokens > 0
    return json.dumps(data, sort_keys=True)


def fitting(sweep: Sweep) -> list[Row]:
    return [r for r in sweep.rows if r.plan is not None and r.plan.fits]
