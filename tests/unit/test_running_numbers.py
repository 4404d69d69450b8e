"""No heading, file name or comment cites a result by a running number of the team's own.

A result is named by its date and what it measured (docs/changelog.md's dates,
docs/benchmarks.md's headings, docs/gpu-runs/' file names); a "session NN", "round N" or
"sNN-" means nothing outside the team and breaks when the count restarts. The raw files'
contents are data and are not read; their names are.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.conftest import ROOT

SCANNED = ("launcher", "tests", "benchmarks", "docs", "README.md", "Dockerfile", "deploy", "docker")
RAW = "docs/gpu-runs/"
READ_IN_RAW = {"docs/gpu-runs/INDEX.md"}
"""The raw folder's own prose (the index); the data files beside it are not read."""
ALLOWED = {"tests/unit/test_running_numbers.py"}
"""The one file that must spell citations out: its cases are what the patterns catch."""
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


@pytest.mark.parametrize(
    ("line", "cites"),
    [
        ("measured on the H200 (session 24: boot 1 ...)", True),
        ("### Session 26: both bars met", True),
        ("Sessions 18 to 25 say how it got there.", True),
        ("the same as round 2's provider", True),
        ("`--tree` at the round-2 tree", True),
        ("docs/gpu-runs/h200-s26-logs.txt", True),
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
    [
        ("h200-s26-glm-call-x.json", True),
        ("h200-keys-s5-versions.txt", True),
        ("round-5-boot.txt", True),
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
        if path in ALLOWED or (path.startswith(RAW) and path not in READ_IN_RAW):
            continue
        try:
            text = (ROOT / path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # binary fixtures (compressed schemas); a file staged for deletion
        found += [f"{path}: {line}" for line in citations(text)]
    assert not found, "cite a date and what it measured instead:\n" + "\n".join(found)
