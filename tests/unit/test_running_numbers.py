"""No heading, file name or comment cites a result by a running number of the team's own.

A result is named by its date and what it measured (docs/changelog.md's dates,
docs/benchmarks.md's headings, docs/gpu-runs/' file names); a "session NN", "round N" or
"sNN-" means nothing outside the team and breaks when the count restarts. The raw files'
contents are data and are not read; their names are.
"""

from __future__ import annotations

import random
import re
import subprocess

import pytest

from tests.conftest import ROOT

SCANNED = ("launcher", "tests", "benchmarks", "docs", "README.md", "Dockerfile", "deploy", "docker")
RAW = "docs/gpu-runs/"
READ_IN_RAW = {"docs/gpu-runs/INDEX.md"}
"""The raw folder's own prose (the index); the data files beside it are not read."""
CITATION = re.compile(
    r"\b[Ss]essions? \d+\b"  # "session NN", "Sessions NN to MM"
    r"|(?<![-\w])[Rr]ounds? \d+\b"  # "round N" (not a ``--rounds N`` option)
    r"|\b[Rr]ound-\d+\b"  # "the round-N tree"
    r"|\bh200-s\d+\b"  # an old raw file's name
)
NAME = re.compile(r"(?:^|[-_])(?:s\d{1,2}|session-?\d+|round-?\d+)(?:[-_.]|$)", re.I)


def _tracked() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--", *SCANNED], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def citations(text: str) -> list[str]:
    """Each line of ``text`` that cites a running number."""
    return [line.strip() for line in text.splitlines() if CITATION.search(line)]


_N = random.Random(66).sample(range(1, 40), 4)
"""Running numbers for the cases, drawn (seeded): this file spells no citation out, so it is
scanned like every other."""
CITING_LINES = [
    f"measured on the H200 (session {_N[0]}: boot 1 ...)",
    f"### Session {_N[1]}: both bars met",
    f"Sessions {_N[2]} to {_N[3]} say how it got there.",
    f"the same as round {_N[0]}'s provider",
    f"`--tree` at the round-{_N[1]} tree",
    f"docs/gpu-runs/h200-s{_N[2]}-logs.txt",
]
CITING_NAMES = [
    f"h200-s{_N[3]}-glm-call-x.json",
    f"h200-keys-s{_N[0]}-versions.txt",
    f"round-{_N[1]}-boot.txt",
]


@pytest.mark.parametrize(
    ("line", "cites"),
    [(line, True) for line in CITING_LINES]
    + [
        ("python benchmarks/thread_samples.py [--depth 60] [--rounds 7]", False),
        ("20 rounds of the loop", False),
        ("measured on the H200 (docs/changelog.md, 2026-12-04)", False),
        ("tl.store(table_ptr + row * s0 + cols * s1, -1)", False),
    ],
)
def test_the_citation_pattern_tells_a_running_number_from_a_date(line, cites):
    assert bool(citations(line)) is cites


@pytest.mark.parametrize(
    ("name", "cites"),
    [(name, True) for name in CITING_NAMES]
    + [
        ("2026-12-05-h200-glm-fresh-node-bar.json", False),
        ("2026-12-03-h200-generated-matrix-seed-1-call-a.json", False),
    ],
)
def test_the_name_pattern_tells_a_running_number_from_a_date(name, cites):
    assert bool(NAME.search(name)) is cites


def test_no_tracked_file_is_named_by_a_running_number():
    named = [path for path in _tracked() if any(NAME.search(p) for p in path.split("/"))]
    assert not named, f"name these by date and what they measured: {named}"


def test_no_comment_heading_or_doc_cites_a_running_number():
    found = []
    for path in _tracked():
        if path.startswith(RAW) and path not in READ_IN_RAW:
            continue
        try:
            text = (ROOT / path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # binary fixtures (compressed schemas); a file staged for deletion
        found += [f"{path}: {line}" for line in citations(text)]
    assert not found, "cite a date and what it measured instead:\n" + "\n".join(found)
