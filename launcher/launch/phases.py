"""The launch's own phases (plan, preflight, restore, checks, rendezvous), and what the boot
expects of every process's phases, from the calibration store (issue 67).

The launcher's phase file is written once the run directory exists and again right before the
exec; it carries the boot's kind, its build and the expected times of every process, which the
workers read from it (they query the store for none of it) and ``status`` shows before a phase
starts.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

from launcher.contract import store
from launcher.contract.base import ContractError
from launcher.contract.phases import (
    BOOTS_FILE,
    LAUNCHER,
    BootKind,
    Boots,
    Recorder,
    phase_file,
    read_boots,
)


def _say(line: str) -> None:
    print(f"b12x-launch: {line}", file=sys.stderr, flush=True)


def build_id() -> str:
    """The image's build id in force ('unknown' where it cannot be read: expected times then
    come only from boots that could not read theirs either)."""
    from launcher.buildfile import resolve_build
    from launcher.buildid import BuildIdError

    try:
        return resolve_build(os.environ, say=lambda line: None)[0]
    except (BuildIdError, OSError):
        return "unknown"


def boots_path(cache_root: str | Path, fingerprint: str) -> Path:
    return store.folder(cache_root, fingerprint) / BOOTS_FILE


def history(path: Path, say=_say) -> Boots:
    """The store's boots of this plan; none when the file is unusable (said once)."""
    try:
        return read_boots(path)
    except ContractError as exc:
        say(f"note: expected phase times not read: {exc}")
        return Boots()


def boot_kind(boots: Boots, build: str, *, artifact: bool, folder: Path) -> BootKind:
    """``artifact`` when a cache artifact was restored; ``warm`` after an earlier boot of this
    plan and build here (or a measurement record of one); else ``cold``."""
    if artifact:
        return "artifact"
    if boots.latest(build) is not None:
        return "warm"
    ranks = list(folder.glob("rank*.json")) if folder.is_dir() else []
    return "warm" if ranks else "cold"


def expected_from(boots: Boots, build: str, kind: BootKind) -> tuple[dict, str]:
    """Every process's expected phase times (who -> phase -> seconds) and where they came
    from: the newest boot of this build of the same kind, else of any kind."""
    prefer = {"artifact": ("artifact", "warm"), "warm": ("warm",), "cold": ("cold",)}[kind]
    for want in (*prefer, None):
        boot = boots.latest(build, want)
        if boot is not None and (want is None or boot.kind == want):
            when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(boot.when))
            return boot.phases, f"{boot.kind} boot of {when} UTC, ready in {boot.ready:.0f}s"
    return {}, ""


class LaunchPhases:
    """The launcher's recorder, and the boot's expectations for every process."""

    def __init__(self, cache_root: str | Path, fingerprint: str, started: float, say=_say):
        self.say = say
        self.cache_root = cache_root
        self.fingerprint = fingerprint
        self.build = build_id()
        self.held: list[str] | None = []
        """Phase lines said before the run directory exists: a launch refused before it
        stays one error line, so they are said only once the launch goes on."""
        self.recorder = Recorder(
            None,
            LAUNCHER,
            started=started,
            say=self._say,
            fingerprint=fingerprint,
            host=socket.gethostname(),
            pid=os.getpid(),
        )
        self.expect(artifact=False)

    def _say(self, line: str) -> None:
        if self.held is not None:
            self.held.append(line)
        else:
            self.say(line)

    def expect(self, *, artifact: bool) -> None:
        """Read the store again (a restored artifact brings its baked boots)."""
        path = boots_path(self.cache_root, self.fingerprint)
        boots = history(path, self.say)
        kind = boot_kind(boots, self.build, artifact=artifact, folder=path.parent)
        expected, source = expected_from(boots, self.build, kind)
        f = self.recorder.file
        f.build, f.boot_kind, f.boots_file = self.build, kind, str(path.absolute())
        f.expected_all, f.expected_from = expected, source
        self.recorder.expected = dict(expected.get(LAUNCHER, {}))
        for phase in f.phases:
            phase.expected = self.recorder.expected.get(phase.name)

    def begin(self, name: str, at: float | None = None) -> None:
        self.recorder.begin(name, at)

    def in_run_dir(self, run_dir: Path, ready_url: str, fingerprint: str) -> None:
        """From now on the file is written into the run directory (``fingerprint``: the plan
        as launched, which keys the store; the cards or the installed line may change it)."""
        if fingerprint != self.fingerprint:
            self.fingerprint = self.recorder.file.fingerprint = fingerprint
            self.expect(artifact=self.recorder.file.boot_kind == "artifact")
        self.recorder.file.ready_url = ready_url
        self.recorder.path = run_dir / phase_file(LAUNCHER)
        self.recorder.write()
        for line in self.held or []:
            self.say(line)
        self.held = None

    def before_exec(self) -> None:
        """The last write: every launcher phase ended; vLLM's processes go on from here."""
        self.recorder.begin("exec")
        self.recorder.end()
