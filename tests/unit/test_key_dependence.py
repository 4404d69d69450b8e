"""Which profile keys matter to what: the fingerprint, the deployment and the gathered facts.

The fingerprints of the shipped profiles are pinned: they key every calibration record, qualified
record and cache artifact a deployment has, so a change to how keys are hashed would orphan them.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from launcher.plan.fingerprint import IGNORED, profile_fingerprint
from launcher.profile import load_profile
from launcher.profile.schema import Profile, Reader, unread_paths
from tests.conftest import PROFILES

SHIPPED = {
    "deepseek-v32.yaml": "72184d2cd6ca",
    "glm52-2node.yaml": "27474cada00a",
    "glm52-dcp1.yaml": "b865d5c8aa14",
    "glm52-dcp2.yaml": "625f8210ee67",
    "glm52.yaml": "42e5db23e3dc",
    "kimi-k2.yaml": "ef16b1155de2",
    "tiny-cpu.yaml": "a9ce37d1ef97",
}
"""Each shipped profile's fingerprint, computed before the keys' dependence moved onto the
schema's fields (main at 3141fa7); the GLM-5.2 and Kimi-K2 profiles' since they refuse prompt
logprobs (``serving.prompt_logprobs: refuse``, which changes their vLLM command)."""


def test_every_shipped_profile_is_pinned():
    assert sorted(SHIPPED) == sorted(p.name for p in PROFILES.glob("*.yaml"))


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_shipped_profiles_keep_their_fingerprints(name):
    assert profile_fingerprint(load_profile(PROFILES / name).profile) == SHIPPED[name]


pytestmark = pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
"""The changed values below are not validated (pydantic says so when it dumps them)."""

IGNORED_SETTINGS = (
    "name=other",
    "description=another text",
    "model.served_name=other",
    "serving.host=127.0.0.1",
    "serving.port=9001",
    "runtime.cache_root=/elsewhere",
    "runtime.run_dir=/elsewhere/runs",
    "prewarm.strict_jit=true",
    "prewarm.canary=true",
    "prewarm.compile_times=true",
    "hardware.reserved_by_others=3GiB",
    "qualify.concurrency=2",
    "qualify.max_seconds=10",
)
"""One setting of each key the fingerprint ignores (labels, where it listens or keeps its
files, whether a late compile is fatal, the diagnostics, the cards' other processes, qualify's
workload)."""


@pytest.mark.parametrize("setting", IGNORED_SETTINGS)
def test_an_ignored_key_keeps_the_fingerprint(setting):
    loaded = load_profile(PROFILES / "glm52.yaml", [setting])
    assert profile_fingerprint(loaded.profile) == SHIPPED["glm52.yaml"]


@pytest.mark.parametrize(
    "setting",
    [
        "serving.max_num_seqs=4",
        "serving.max_model_len=65536",
        "memory.safety_margin=1GiB",
        "prewarm.autotune=true",
        "hardware.memory=90GiB",
        "parallel.interleave=2",
        "serving.max_logprobs=64",
        "serving.prompt_logprobs=reserve",
        "prewarm.early_keys=false",
        "prewarm.sampler_ahead=false",
        "prewarm.inductor_pool=0",
    ],
)
def test_a_key_that_changes_memory_or_code_changes_the_fingerprint(setting):
    loaded = load_profile(PROFILES / "glm52.yaml", [setting])
    assert profile_fingerprint(loaded.profile) != SHIPPED["glm52.yaml"]


# ---------------------------------------------------------------- the readers, key by key


def _scalar(annotation: Any) -> type:
    """The first of int, float, str a field's annotation takes (through Annotated, unions and
    Literals), for a value of its kind where the field holds None."""
    if typing.get_origin(annotation) is Literal:
        return type(typing.get_args(annotation)[0])
    if annotation in (bool, int, float, str):
        return annotation
    for arg in typing.get_args(annotation):
        if arg is not type(None) and (found := _scalar(arg)) is not type(None):
            return found
    return type(None)


def _another(value: Any, annotation: Any) -> Any:
    """A value other than ``value`` of the field's kind (not validated: no reader that skips the
    key looks at it, and one that does not skip it sees a change)."""
    if value is None:
        value = {int: 0, float: 0.0, str: ""}.get(_scalar(annotation), "")
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 4096
    if isinstance(value, str):
        return value + "-other"
    if isinstance(value, list):
        return [*value, 4096]
    if isinstance(value, dict):
        return {**value, "OTHER": "1"}
    raise TypeError(f"no other value for {value!r}")


def _set(model: BaseModel, path: tuple[str, ...], value: Any) -> BaseModel:
    head, *rest = path
    new = _set(getattr(model, head), tuple(rest), value) if rest else value
    return model.model_copy(update={head: new})


def changed(p: Profile, path: tuple[str, ...]) -> Iterator[tuple[str, Profile]]:
    """``p`` with one key under ``path`` changed, for each key there (each field of a section,
    one at a time), named by its dotted path."""
    node: Any = p
    for key in path[:-1]:
        node = getattr(node, key)
    value, field = getattr(node, path[-1]), type(node).model_fields[path[-1]]
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from changed(p, (*path, name))
        return
    yield ".".join(path), _set(p, path, _another(value, field.annotation))


def test_the_readers_skip_what_the_old_lists_skipped():
    """The fingerprint's, the deployment's and the facts' keys as the hand-kept lists had them
    (``fingerprint.IGNORED``, ``Deployment.UNREAD``, ``sweep.PLAN_ONLY``) at 3141fa7; since then
    the facts read ``serving.max_num_batched_tokens`` (the weights' load buffers depend on it:
    a sweep varying it re-used the first row's weights) and skip ``model.served_name`` and
    ``qualify``, the deployment skips every label and ``memory``; ``prewarm.canary`` (a proof
    of the counters, added later) and ``prewarm.compile_times`` (a diagnostic, once an
    environment switch) are labels to every reader."""
    assert set(unread_paths(Reader.FINGERPRINT)) == {
        ("name",),
        ("description",),
        ("model", "served_name"),
        ("serving", "host"),
        ("serving", "port"),
        ("runtime",),
        ("prewarm", "strict_jit"),
        ("prewarm", "canary"),
        ("prewarm", "compile_times"),
        ("hardware", "reserved_by_others"),
        ("qualify",),
    }
    facts = set(unread_paths(Reader.FACTS))
    assert ("serving", "max_num_batched_tokens") not in facts
    assert {("memory",), ("prewarm",), ("runtime",), ("parallel", "decode_context")} <= facts
    deployment = set(unread_paths(Reader.DEPLOYMENT))
    assert {("hardware", "reserved_by_others"), ("serving", "max_model_len")} <= deployment


def _leaves(reader: Reader, p: Profile) -> list[tuple[str, Profile]]:
    return [one for path in unread_paths(reader) for one in changed(p, path)]


@pytest.mark.parametrize("name", ["glm52.yaml", "glm52-dcp2.yaml", "kimi-k2.yaml"])
def test_the_fingerprint_skips_exactly_its_unread_keys(name):
    p = load_profile(PROFILES / name).profile
    for leaf, other in _leaves(Reader.FINGERPRINT, p):
        assert profile_fingerprint(other) == SHIPPED[name], leaf
    skipped = {path[0] if len(path) == 1 else ".".join(path) for path in IGNORED}
    for section in ("hardware", "model", "parallel", "serving", "memory", "vllm"):
        for leaf, other in changed(p, (section,)):
            if leaf not in skipped:
                assert profile_fingerprint(other) != SHIPPED[name], leaf


@pytest.mark.parametrize("name", ["glm52.yaml", "deepseek-v32.yaml"])
def test_the_facts_do_not_depend_on_their_unread_keys(name, monkeypatch):
    """Each key the facts skip, changed, gathers the same figures; their checks run again at
    each use, so they are off here (a changed value need not be one the model takes)."""
    from launcher.deployment import resolve
    from launcher.plan import inputs

    monkeypatch.setattr(inputs, "check_against_facts", lambda *args: None)
    loaded = load_profile(PROFILES / name)
    deployment = resolve(loaded.profile)

    def figures(profile: Profile):
        got = inputs.gather(replace(loaded, profile=profile), deployment)
        return got.facts, got.gpu, got.weights, got.weights_source, got.weights_detail

    same = figures(loaded.profile)
    for leaf, other in _leaves(Reader.FACTS, loaded.profile):
        assert figures(other) == same, leaf
    batched = ("serving", "max_num_batched_tokens")
    assert figures(next(changed(loaded.profile, batched))[1]) != same
