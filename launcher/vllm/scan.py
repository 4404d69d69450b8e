"""``python -m launcher.vllm.scan SOURCE_DIR...``: read each vLLM release's source (a
directory holding ``vllm/``, e.g. an unpacked wheel; never imported) and write which
declared internals it has, with their parameters, into ``releases.json``.

Adding a release: unpack its wheel's ``.py`` files
(``pip download --no-deps --only-binary=:all: --python-version 3.12 --platform
manylinux_2_28_x86_64 vllm==X``, then ``unzip WHEEL 'vllm/*.py' 'vllm/**/*.py'``), run this
on it, and read the table's diff.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from launcher.owned.write import write_text
from launcher.vllm.releases import TABLE, read_all, version_of


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m launcher.vllm.scan", description=__doc__)
    parser.add_argument("sources", nargs="+", type=Path, help="directories holding vllm/")
    parser.add_argument("--table", type=Path, default=TABLE)
    args = parser.parse_args(argv)
    table = json.loads(args.table.read_text()) if args.table.is_file() else {"releases": {}}
    for root in args.sources:
        version = version_of(root)
        table["releases"][version] = read_all(root)
        missing = [n for n, r in table["releases"][version].items() if r is False]
        print(f"{version}: {len(missing)} declared internals absent: {', '.join(missing) or '-'}")
    table["releases"] = dict(sorted(table["releases"].items(), key=lambda kv: _key(kv[0])))
    table["how"] = "python -m launcher.vllm.scan on each release's wheel, unpacked (its .py files)"
    write_text(args.table, dumps(table))  # whole or not at all (the owned-files boundary)
    return 0


def dumps(table: dict) -> str:
    """One reading a line, so that a new release's diff reads entry by entry."""
    lines = ["{", f' "how": {json.dumps(table["how"])},', ' "releases": {']
    for i, (version, readings) in enumerate(table["releases"].items()):
        lines.append(f"  {json.dumps(version)}: {{")
        items = sorted(readings.items())
        lines += [
            f"   {json.dumps(name)}: {json.dumps(reading)}" + ("," if j < len(items) - 1 else "")
            for j, (name, reading) in enumerate(items)
        ]
        lines.append("  }" + ("," if i < len(table["releases"]) - 1 else ""))
    return "\n".join([*lines, " }", "}", ""])


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split(".")[:3])


if __name__ == "__main__":
    raise SystemExit(main())
