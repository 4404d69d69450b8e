"""The bisection of benchmarks/kv_ceiling.py (the search only; its boots need GPUs)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def search():
    spec = importlib.util.spec_from_file_location(
        "kv_ceiling", ROOT / "benchmarks" / "kv_ceiling.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.search


def survives_below(ceiling: int):
    return lambda size: size <= ceiling


def test_finds_the_ceiling_within_tolerance(search):
    found = search(1000, 2000, 0.001, 30, survives_below(1537))
    assert found.ceiling <= 1537 < found.failure
    assert found.failure - found.ceiling <= 1
    assert all(ok == (size <= 1537) for size, ok in found.trials)


def test_a_ceiling_never_rests_on_the_arithmetic_bound(search):
    # Everything up to the bound survives: the bound itself is booted, not assumed to fail.
    found = search(1000, 1010, 0.05, 30, survives_below(5000))
    assert found.ceiling == 1010 and found.failure is None
    assert found.trials[-1] == (1010, True)


def test_a_failing_start_is_halved_and_bounds_the_search(search):
    found = search(1000, 4000, 0.01, 30, survives_below(700))
    assert found.trials[:2] == [(1000, False), (500, True)]
    assert found.ceiling <= 700 < found.failure <= 1000


def test_max_boots_bounds_the_trials(search):
    found = search(1000, 1 << 20, 0.0, 4, survives_below(1 << 30))
    assert len(found.trials) == 4
    assert found.ceiling is not None and found.failure is None


def test_nothing_survives(search):
    found = search(8, 16, 0.01, 30, survives_below(0))
    assert found.ceiling is None and found.failure == 1


def test_an_earlier_run_sets_the_bounds_and_counts(search):
    earlier = [(5000, False), (2500, True), (3750, False)]
    found = search(5000, 9000, 0.01, 8, survives_below(3000), seen=earlier)
    assert found.trials[:3] == earlier
    assert all(2500 < size < 3750 for size, _ in found.trials[3:])
    assert found.ceiling <= 3000 < found.failure <= 3750
    assert len(found.trials) <= 8
