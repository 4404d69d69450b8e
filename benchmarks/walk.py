"""One profile's trip from load to the vLLM argv, room by room (a measurement, not a test).

    python benchmarks/walk.py [PROFILE] [--tree DIR]

Runs ``b12x-launch PROFILE --dry-run --json`` in this process under ``sys.setprofile`` and
records every call into a ``launcher`` function, in order. Each module belongs to a room
(tests/unit/test_architecture.py's ``ORDER``: base, profile, deployment, plan, report,
launch, runtime, pipeline, ...). It prints the rooms in the order they were entered, how
many times the trip moved to another room and how many of those moves went back to an
earlier room, how often ``deployment.resolve`` and the argv builder ran, and the modules
entered most. ``--tree DIR`` walks another checkout (``git archive`` of an older commit,
unpacked): its ``launcher`` is imported instead, rooms named by this checkout's map.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import itertools
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
ORDER = (
    "base",
    "profile",
    "deployment",
    "plan",
    "report",
    "launch",
    "runtime",
    "pipeline",
    "qualify",
    "emit",
    "cli",
)
TOP = {"deployment": "deployment", "pipeline": "pipeline", "cli": "cli", "entrypoint": "cli"}


def room(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ORDER:
        return parts[1]
    return TOP.get(parts[1], "base") if len(parts) > 1 else "base"


def walk(profile: str) -> list[tuple[str, str]]:
    """(module, function) of every launcher call of one dry run, in order."""
    from launcher.cli import cli

    calls: list[tuple[str, str]] = []

    def trace(frame, event, arg):
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if module.startswith("launcher.") or module == "launcher":
                calls.append((module, frame.f_code.co_name))

    out = io.StringIO()
    sys.setprofile(trace)
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            cli.main([profile, "--dry-run", "--json"], standalone_mode=False)
    finally:
        sys.setprofile(None)
    return calls


def report(calls: list[tuple[str, str]]) -> str:
    rank = {name: i for i, name in enumerate(ORDER)}
    trip: list[str] = []
    for module, _ in calls:
        r = room(module)
        if not trip or trip[-1] != r:
            trip.append(r)
    back = sum(1 for a, b in itertools.pairwise(trip) if rank[b] < rank[a])
    resolves = sum(1 for m, f in calls if m == "launcher.deployment" and f == "resolve")
    argv = sum(1 for m, f in calls if m.endswith("vllm_args") and f == "build_command")
    entries = collections.Counter(
        m for (prev, _), (m, _) in itertools.pairwise([("", ""), *calls]) if m != prev
    )
    lines = [
        f"launcher calls: {len(calls)}",
        f"room changes: {len(trip) - 1} ({back} back to an earlier room)",
        f"deployment.resolve: {resolves}; vllm_args.build_command: {argv}",
        "rooms in order: " + " > ".join(trip),
        "modules entered most: "
        + ", ".join(f"{m.removeprefix('launcher.')} {n}" for m, n in entries.most_common(8)),
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", nargs="?", default=str(HERE / "profiles" / "glm52.yaml"))
    ap.add_argument("--tree", help="another checkout whose launcher to walk")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(args.tree).resolve() if args.tree else HERE))
    print(report(walk(str(Path(args.profile).resolve()))))


if __name__ == "__main__":
    main()
