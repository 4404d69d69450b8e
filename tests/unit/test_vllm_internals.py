"""The declared vLLM internals against the release table (``launcher/vllm/releases.json``,
read from each release's source by ``python -m launcher.vllm.scan``)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from launcher.vllm import internals, releases
from launcher.vllm.capabilities import UPSTREAM_RELEASES
from launcher.vllm.internals import DECLARED

TABLE = releases.load()


def test_every_supported_release_has_a_row():
    rows = {releases.line_release(v) for v in TABLE}
    assert set(UPSTREAM_RELEASES) <= rows, sorted(set(UPSTREAM_RELEASES) - rows)


def test_every_declared_internal_is_read_on_every_release():
    for version, readings in TABLE.items():
        assert set(readings) == {e.name for e in DECLARED}, (version, "run launcher.vllm.scan")


@pytest.mark.parametrize("version", sorted(TABLE))
def test_no_release_lacks_an_internal_without_a_declared_fallback_or_skip(version):
    assert releases.gaps(TABLE[version]) == []


def test_names_are_unique_and_groups_have_alternatives():
    names = [e.name for e in DECLARED]
    assert len(names) == len(set(names))
    for group in {e.group for e in DECLARED if e.group}:
        assert sum(e.group == group for e in DECLARED) > 1, group


def test_a_patched_or_wrapped_method_declares_its_signature():
    for e in DECLARED:
        if e.patch is not None:
            assert e.params, e.name
            assert e.patch.restore, e.name


def test_taking_a_refused_internal_away_is_a_gap():
    """The rule can fail: each ``refuse`` entry, taken out of a release's row (seeded pick of
    the release), is named by ``gaps``; a ``skip`` entry taken out is not."""
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    version = rng.choice(sorted(TABLE))
    for e in DECLARED:
        row = dict(TABLE[version])
        row[e.name] = False
        for other in DECLARED:  # the group's alternatives go too
            if e.group and other.group == e.group:
                row[other.name] = False
        named = [g for g in releases.gaps(row) if g.startswith(e.name + " ")]
        if e.without.kind == "refuse":
            assert named, (version, e.name)
        else:
            assert not named, (version, e.name)


def test_a_changed_signature_is_unmet():
    call = internals.by_name("compile.backend_call")
    assert releases.unmet(call, ["self", "graph", "example_inputs"]) is None
    assert "signature" in releases.unmet(call, ["self", "graph", "example_inputs", "extra"])
    load = internals.by_name("compile.adaptor_load")
    assert releases.unmet(load, ["self", "handle", "graph"]) is None
    assert "parameters" in releases.unmet(load, ["self", "key", "handle"])
    assert releases.unmet(load, False) == "absent"


def test_resolve_gives_the_object_or_a_typed_missing():
    entry = internals.by_name("worker.peak_activation_memory")

    class Worker:
        peak_activation_memory = 7

    assert internals.resolve(entry, on=Worker()) == 7
    missing = internals.resolve(entry, on=object())
    assert isinstance(missing, internals.Missing) and not missing
    assert missing.entry is entry and "peak_activation_memory" in str(missing)
    # a module that no vLLM has (the unit venv has none, the full one a real one)
    absent = dataclasses.replace(internals.by_name("scratch.kv_groups"), module="vllm.b12x_none")
    gone = internals.resolve(absent)
    assert isinstance(gone, internals.Missing) and "does not import" in gone.why


def test_read_on_gives_the_member_or_the_declared_fallback_never_the_module(monkeypatch):
    class Runner:
        device = 0  # a falsy value is still the value

    assert internals.read_on("runner.device", Runner(), "cuda:0") == 0
    assert internals.read_on("runner.device", object(), "cuda:0") == "cuda:0"
    monkeypatch.setattr(internals.importlib, "import_module", lambda m: pytest.fail(m))
    assert internals.read_on("runner.device", None) is None  # no object: nothing imported


def test_the_plan_prints_the_downgrades_of_the_release_it_is_checked_against():
    """An upstream deployment (kimi-k2.yaml) planned against 0.26 (the dry run's release) is
    told what that release lacks of what its worker uses; against 0.33, what 0.33 lacks."""
    from click.testing import CliRunner

    from launcher.cli import cli
    from tests.conftest import PROFILES

    for release, part, names in (
        ("0.26", "triton", "triton.a2a_pack, triton.a2a_combine"),
        ("0.33", "vllm", "warmup.block_table"),
    ):
        args = [str(PROFILES / "kimi-k2.yaml"), "--dry-run", "--set", f"vllm.release={release}"]
        out = CliRunner().invoke(cli, args)
        assert out.exit_code == 0, out.output
        text = " ".join(out.output.split())
        assert f"note: {part}: not all done on vLLM {release}.0: {names} missing" in text


def test_a_patch_wraps_only_the_signature_it_was_written_for(monkeypatch):
    """``compile_dir.install`` on a vLLM whose ``VllmBackend.__call__`` took one more
    parameter: not wrapped (the check before the weights names the downgrade), where the
    wrapper would have broken every compile."""
    import sys
    import types

    from launcher.runtime import compile_dir

    for extra in ((), ("runtime_shape",)):
        module = types.ModuleType("vllm.compilation.backends")
        args = ", ".join(("self", "graph", "example_inputs", *extra))
        namespace: dict = {}
        exec(f"def __call__({args}): return 'compiled'", namespace)
        module.VllmBackend = type("VllmBackend", (), {"__call__": namespace["__call__"]})
        for name in ("vllm", "vllm.compilation"):
            monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
        monkeypatch.setitem(sys.modules, "vllm.compilation.backends", module)
        monkeypatch.setitem(sys.modules, "vllm.compilation.compiler_interface", None)
        wrapped = compile_dir.install()
        assert wrapped == ([] if extra else ["VllmBackend.__call__"]), extra


def test_an_assigned_internal_is_read_on_a_live_object_never_imported():
    """An attribute vLLM sets on an object (``assigned``): ``read_on`` gives it or the
    declared fallback; ``resolve`` without the object has no module-level name to import,
    and says so rather than reading the module."""
    entry = internals.by_name("compile.aot_compiled_fn")
    assert entry.where == "vllm.compilation.decorators (sets .aot_compiled_fn)"

    class Model:
        aot_compiled_fn = "fn"

    assert internals.read_on(entry, Model()) == "fn"
    assert internals.read_on("compile.was_aot_compile_fn_loaded_from_disk", Model(), True)
    with pytest.raises(TypeError, match="read it with read_on"):
        internals.resolve(entry)
