"""A worker's phases (issue 67): where vLLM's worker spends its boot, written to the run
directory as ``phases-rank<N>.json`` at every boundary.

``PhasedMixin`` sits before the planned worker and wraps the steps vLLM's engine calls on
every worker, in order: ``init_device`` (device init), ``load_model`` (weights),
``determine_available_memory`` (the stage, then vLLM's memory profile: the planned worker
says where one ends), ``initialize_from_config`` (KV sizing), ``compile_or_warm_up_model``
(warmup, graph capture, the warmup after it). Rank 0 then asks the server's ``/health`` until
it answers (api server, then ready) and adds the boot's times to the calibration store, where
the next boot's expected times come from.

The module's functions (``begin``, ``part``) are what the planned worker calls at its own
boundaries; without a run directory (vLLM started without the launcher) they do nothing.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from launcher.contract.base import ContractError
from launcher.contract.phases import (
    LAUNCHER,
    BootTimes,
    PhaseFile,
    Recorder,
    add_boot,
    durations,
    phase_file,
    rank_name,
    read_phases,
)
from launcher.contract.runfile import RUN_DIR_ENV
from launcher.vllm.internals import read_on

logger = logging.getLogger("vllm.b12x_launch")

READY_POLL_S = 0.5
READY_GIVE_UP_S = 4 * 3600.0
"""Rank 0 stops asking ``/health`` after this long (the boot is then not recorded)."""

_recorder: Recorder | None = None
_launch: PhaseFile | None = None


def _say(line: str) -> None:
    logger.info("b12x-launch %s", line)


def start(rank: int, env: dict[str, str] | None = None) -> Recorder | None:
    """This process's recorder (made once); None without a run directory."""
    global _recorder, _launch
    if _recorder is not None:
        return _recorder
    env = os.environ if env is None else env
    run_dir = env.get(RUN_DIR_ENV)
    if not run_dir:
        return None
    run = Path(run_dir)
    now = time.time()
    try:
        _launch = read_phases(run / phase_file(LAUNCHER))
    except ContractError:
        _launch = None  # vLLM started from a printed command: no launch phases, no expectations
    who = rank_name(rank)
    expected = _launch.expected_all.get(who, {}) if _launch else {}
    _recorder = Recorder(
        run / phase_file(who),
        who,
        started=now,
        say=_say,
        fingerprint=_launch.fingerprint if _launch else "",
        host=socket.gethostname(),
        pid=os.getpid(),
        expected=expected,
        expected_from=_launch.expected_from if _launch else "",
    )
    exec_at = _exec_time(_launch)
    if exec_at is not None and exec_at <= now:
        # From the launcher's exec to this worker's first step: vLLM's processes start.
        _recorder.begin("vllm start", at=exec_at)
    return _recorder


def _exec_time(launch: PhaseFile | None) -> float | None:
    if launch is None or not launch.phases:
        return None
    last = launch.phases[-1]
    return last.ended if last.name == "exec" else None


def begin(name: str) -> None:
    if _recorder is not None:
        _recorder.begin(name)


def part(name: str, done: int, total: int) -> None:
    if _recorder is not None:
        _recorder.part(name, done, total)


def end() -> None:
    if _recorder is not None:
        _recorder.end()


class PhasedMixin:
    """Mixed in before the planned worker: each vLLM step of the boot is a phase."""

    def init_device(self) -> Any:
        if start(int(getattr(self, "rank", 0))) is not None:
            begin("device init")
        return super().init_device()

    def load_model(self, *args: Any, **kwargs: Any) -> Any:
        begin("weights")
        return super().load_model(*args, **kwargs)

    def determine_available_memory(self) -> int:
        begin("stage")  # the planned worker begins "memory profile" when its stage ends
        return super().determine_available_memory()

    def initialize_from_config(self, kv_cache_config: Any) -> None:
        begin("kv sizing")
        return super().initialize_from_config(kv_cache_config)

    def compile_or_warm_up_model(self) -> Any:
        begin("warmup")
        runner = getattr(self, "model_runner", None)
        capture = read_on("runner.capture_model", runner)
        if capture is not None:

            def captured(*args: Any, **kwargs: Any) -> Any:
                begin("graph capture")
                try:
                    return capture(*args, **kwargs)
                finally:
                    begin("warmup after capture")

            runner.capture_model = captured
        try:
            result = super().compile_or_warm_up_model()
        finally:
            if capture is not None:
                del runner.capture_model  # the class's own again
        url = _launch.ready_url if _launch is not None else ""
        if _recorder is not None and getattr(self, "rank", 0) == 0 and url:
            begin("api server")
            threading.Thread(
                target=watch_ready, args=(url,), name="b12x-ready", daemon=True
            ).start()
        else:
            end()
        return result


def watch_ready(url: str, *, poll: float = READY_POLL_S, give_up: float = READY_GIVE_UP_S) -> bool:
    """Ask ``url`` until it answers 200; then mark ready and record the boot in the store."""
    deadline = time.time() + give_up
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    ready()
                    return True
        except OSError:
            pass
        time.sleep(poll)
    return False


def ready() -> None:
    """The server answers: the last phase, and this boot's times into the store."""
    if _recorder is None:
        return
    _recorder.begin("ready")
    mark = _recorder.file.phases[-1]
    mark.ended = _recorder.file.ready_at = mark.started  # a moment, not a span
    # The boot's times into the store before the phase file says ready: whoever waits for
    # ``status`` to say ready and then stops the server (a test did, under load) would
    # otherwise stop it before the times are kept, and the next boot would expect nothing.
    try:
        record_boot(_recorder, _launch)
    except (OSError, ValueError) as exc:
        _say(f"{_recorder.file.who}: boot times not recorded: {exc}")
    _recorder.write()


def record_boot(recorder: Recorder, launch: PhaseFile | None) -> BootTimes | None:
    """Every process's phase times of this run directory (this node's) into ``boots.json``."""
    if launch is None or not launch.boots_file or recorder.path is None:
        return None
    run = recorder.path.parent
    phases: dict[str, dict[str, float]] = {LAUNCHER: durations(launch)}
    for path in sorted(run.glob("phases-rank*.json")):
        try:
            other = read_phases(path)
        except ContractError:
            continue
        phases[other.who] = durations(other)
    phases[recorder.file.who] = recorder.durations()
    boot = BootTimes(
        build=launch.build or "unknown",
        kind=launch.boot_kind or "cold",
        when=launch.started,
        ready=round(max(0.0, (recorder.file.ready_at or time.time()) - launch.started), 3),
        phases=phases,
    )
    add_boot(Path(launch.boots_file), boot)
    _say(f"{recorder.file.who}: ready {boot.ready:.1f}s after the launch ({boot.kind} boot)")
    return boot
