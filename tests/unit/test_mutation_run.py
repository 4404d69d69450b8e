"""The mutation run (``benchmarks/mutation.py``) in a reduced form: its mutants are seeded and
well formed, and a mutant of the planner's arithmetic is killed by the plan's tests while the
unmutated tree passes them. The full run is by hand (its command is in the module)."""

from __future__ import annotations

import ast
import importlib.util
import sys

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("mutation", ROOT / "benchmarks" / "mutation.py")
mutation = importlib.util.module_from_spec(_spec)
sys.modules["mutation"] = mutation  # dataclasses look their module up
_spec.loader.exec_module(mutation)

PLANNER = mutation.GROUPS["planner"]


def test_a_seed_names_the_same_mutants_and_another_seed_others():
    every = mutation.enumerate_group(PLANNER)
    assert [m.id for m in every] == list(range(len(every)))
    first = mutation.choose(every, 66, 40)
    assert first == mutation.choose(mutation.enumerate_group(PLANNER), 66, 40)
    assert first != mutation.choose(every, 67, 40)
    assert len(first) == 40 and len({m.id for m in first}) == 40


def test_every_mutant_parses_and_changes_only_its_own_span():
    """Over a seeded sample of each group (every one by hand: ``--list`` and this check)."""
    seed = 66
    print(f"seed {seed}")
    for name, group in mutation.GROUPS.items():
        every = mutation.enumerate_group(group)
        assert every, name
        sources = {path: (ROOT / path).read_bytes() for path in group.files}
        for m in mutation.choose(every, seed, 60):
            source = sources[m.file]
            mutated = m.apply(source)
            ast.parse(mutated)  # a mutant that cannot parse would be killed for nothing
            assert mutated != source, m
            assert mutated[: m.start] == source[: m.start], m
            tail = len(source) - m.end
            assert mutated[len(mutated) - tail :] == source[m.end :], m


def test_the_planner_group_has_every_kind_of_mutant_and_none_in_words():
    every = mutation.enumerate_group(PLANNER)
    kinds = {m.what for m in every}
    for what in ("<= -> <", "== -> !=", "+ -> -", "- -> +", "not dropped", "return 0", "0 -> 1"):
        assert what in kinds, (what, sorted(kinds))
    words = []  # docstrings and f-strings: where a mutant changes what is said, not computed
    for path in PLANNER.files:
        source = (ROOT / path).read_bytes()
        at = mutation._Offsets(source)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.JoinedStr) or (
                isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            ):
                words.append((path, at.start(node), at.end(node)))
    assert not [m for m in every for path, lo, hi in words if m.file == path and lo <= m.start < hi]


def test_a_mutant_of_the_planners_arithmetic_is_killed_and_the_tree_itself_passes(tmp_path):
    """The KV cache is what the card leaves: ``total - fixed`` turned into ``total + fixed``
    must fail the plan's tests; the copy unmutated must pass them."""
    every = mutation.enumerate_group(PLANNER)
    source = (ROOT / "launcher/plan/planner.py").read_bytes()
    (kv,) = [
        m
        for m in every
        if m.file == "launcher/plan/planner.py"
        and m.what == "- -> +"
        and b"kv_bytes = total - sum(" in source.splitlines()[m.line - 1]
    ]
    tree = mutation._copy(ROOT, tmp_path)
    tests = (
        "tests/unit/test_plan.py::test_components_and_kv_fill_the_catalogs_card_in_whole_blocks",
    )
    assert mutation.run_tests(tree, tests, 300)[0] == "passed"
    path = tree / kv.file
    path.write_bytes(kv.apply(path.read_bytes()))
    assert mutation.run_tests(tree, tests, 300)[0] == "failed"
