"""The one provider loop (``runtime.prewarm.flow``): providers run in the order their
declarations make, each handed only what the ones before it provided."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from launcher.profile.prewarm_providers import BUILTIN
from launcher.runtime.prewarm import PrewarmResult, flow, load
from launcher.runtime.prewarm.flow import NONE, Fact, FlowError, ServedKernels


@dataclass
class Fake:
    name: str
    provides: frozenset[Fact] = NONE
    needs: frozenset[Fact] = NONE
    uses: frozenset[Fact] = NONE
    hands: dict[Fact, object] = field(default_factory=dict)
    applies_here: bool = True
    saw: dict[Fact, object] | None = None

    def applies(self, ctx) -> bool:
        return self.applies_here

    def run(self, ctx) -> PrewarmResult:
        self.saw = {fact: ctx.received(fact) for fact in self.needs | self.uses}
        return PrewarmResult(self.name, handed=dict(self.hands))


def names(providers) -> list[str]:
    return [p.name for p in providers]


def ctx() -> SimpleNamespace:
    c = SimpleNamespace(given={})
    c.received = lambda fact: c.given[fact]
    return c


def test_the_order_follows_the_declarations_and_keeps_the_listed_order_otherwise():
    served = frozenset({Fact.SERVED_KERNELS})
    listed = [
        Fake("keys", uses=served | {Fact.LAUNCHED}),
        Fake("b12x", provides=frozenset({Fact.LAUNCHED})),
        Fake("other"),
        Fake("vllm", provides=served | {Fact.LAUNCHED}),
    ]
    assert names(flow.order(listed)) == ["b12x", "other", "vllm", "keys"]
    assert names(flow.order(listed[1:])) == ["b12x", "other", "vllm"]


def test_the_built_in_providers_declare_keys_after_every_provider_that_launches_kernels():
    built = [load(name) for name in ("keys", "census", "triton", "vllm", "b12x")]
    assert names(flow.order(built)) == ["census", "triton", "vllm", "b12x", "keys"]


def test_a_need_no_listed_provider_provides_is_a_named_error():
    needy = Fake("needy", needs=frozenset({Fact.SERVED_KERNELS}))
    with pytest.raises(FlowError, match=r"'needy' needs 'served_kernels', which no listed"):
        flow.order([Fake("b12x", provides=frozenset({Fact.LAUNCHED})), needy])
    # a soft use of the same fact is no error: it runs and is handed None
    user = Fake("user", uses=frozenset({Fact.SERVED_KERNELS}))
    c = ctx()
    flow.run([user], c, lambda p, i, n: p.run(c))
    assert user.saw == {Fact.SERVED_KERNELS: None}


def test_a_cycle_of_declarations_names_who_waits_on_whom():
    a = Fake("a", provides=frozenset({Fact.LAUNCHED}), uses=frozenset({Fact.SERVED_KERNELS}))
    b = Fake("b", provides=frozenset({Fact.SERVED_KERNELS}), needs=frozenset({Fact.LAUNCHED}))
    with pytest.raises(FlowError, match="wait on each other: a after b; b after a"):
        flow.order([a, b])


def test_a_provider_is_handed_the_typed_result_along_its_declared_edge_only():
    served = ServedKernels(frozenset({"vllm.k"}))
    vllm = Fake("vllm", provides=frozenset({Fact.SERVED_KERNELS}))
    vllm.hands = {Fact.SERVED_KERNELS: served}
    keys = Fake("keys", uses=frozenset({Fact.SERVED_KERNELS}))
    blind = Fake("blind")
    c = ctx()
    results = flow.run([keys, blind, vllm], c, lambda p, i, n: p.run(c))
    assert [r.provider for r in results] == ["blind", "vllm", "keys"]
    assert keys.saw == {Fact.SERVED_KERNELS: served}
    assert blind.saw == {}  # declared nothing: handed nothing


def test_a_provider_that_hands_what_it_does_not_declare_is_refused():
    liar = Fake("liar", hands={Fact.SERVED_KERNELS: ServedKernels(frozenset())})
    c = ctx()
    with pytest.raises(FlowError, match="'liar' handed"):
        flow.run([liar], c, lambda p, i, n: p.run(c))


def test_a_provider_that_does_not_apply_is_recorded_with_its_reason_and_hands_nothing():
    served = ServedKernels(frozenset({"k"}))
    off = Fake("vllm", provides=frozenset({Fact.SERVED_KERNELS}), applies_here=False)
    off.hands = {Fact.SERVED_KERNELS: served}
    keys = Fake("keys", uses=frozenset({Fact.SERVED_KERNELS}))
    said = []
    c = ctx()
    results = flow.run([off, keys], c, lambda p, i, n: p.run(c), lambda p, why: said.append(why))
    assert results[0].skipped == flow.NOT_USED and said == [flow.NOT_USED]
    assert keys.saw == {Fact.SERVED_KERNELS: None}


def test_the_worker_and_the_prewarm_command_run_the_one_loop():
    """Both callers go through ``flow.run`` (the command lists in ``flow.order``'s order);
    neither loops over providers calling ``run`` itself."""
    from launcher.runtime.prewarm import command
    from launcher.runtime.worker import stage

    worker = inspect.getsource(stage.prewarm)
    run_prewarm = inspect.getsource(command.run_prewarm)
    for source in (worker, run_prewarm):
        assert "flow.run(" in source
        assert ".applies(" not in source
    assert "flow.order(" in inspect.getsource(command.providers)


def test_every_built_in_provider_declares_its_edges():
    for name in BUILTIN:
        provider = load(name)
        for what in ("provides", "needs", "uses"):
            assert isinstance(getattr(provider, what), frozenset), (name, what)


def test_a_context_refuses_a_read_the_provider_did_not_declare():
    from launcher.runtime.prewarm import PrewarmContext

    c = PrewarmContext(deployment=None, facts=None)  # type: ignore[arg-type]: not read here
    c.given = {Fact.LAUNCHED: None}
    assert c.received(Fact.LAUNCHED) is None
    with pytest.raises(KeyError, match="served_kernels"):
        c.received(Fact.SERVED_KERNELS)
