"""A result is cited by a heading of docs/benchmarks.md that says what it measured (issue 66):
every ``benchmarks.md, "Heading"`` in the code, the tests and the docs names a heading the
page has, so a rewrite of the page cannot leave a citation pointing at nothing."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "benchmarks.md"
CITE = re.compile(r"benchmarks\.md\W{0,4}\"([^\"\n]+)\"")
WHERE = ("launcher", "tests", "benchmarks", "docs")


def _citations() -> list[tuple[str, str]]:
    files = [ROOT / "README.md"] + [
        p for top in WHERE for p in (ROOT / top).rglob("*") if p.suffix in {".py", ".md", ".sh"}
    ]
    return [
        (str(p.relative_to(ROOT)), m.group(1))
        for p in files
        if p.is_file() and p != Path(__file__).resolve()  # this file's examples cite nothing
        for m in CITE.finditer(p.read_text(errors="replace"))
    ]


def test_every_cited_benchmarks_heading_is_on_the_page():
    headings = {
        line.lstrip("#").strip() for line in PAGE.read_text().splitlines() if line.startswith("#")
    }
    cited = _citations()
    assert cited, "no citation found: the pattern no longer matches how results are cited"
    missing = [(where, h) for where, h in cited if h not in headings]
    assert missing == [], missing


def test_a_citation_of_a_heading_the_page_lacks_is_found(tmp_path):
    text = 'see docs/benchmarks.md, "KV blocks and late compiles, before the counters moved"'
    assert [m.group(1) for m in CITE.finditer(text)] == [
        "KV blocks and late compiles, before the counters moved"
    ]
