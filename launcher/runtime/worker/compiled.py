"""vLLM's compiled pieces around the planned worker: where vLLM names and loads their
directory (``runtime.compile_dir``), the links a warm boot looks for, and whether a boot from
a cache artifact loaded its compiled graph (``runtime.compile_key``)."""

from __future__ import annotations

from typing import Any

from launcher.runtime.worker.log import logger, say
from launcher.runtime.worker.runplan import RunPlan
from launcher.vllm.internals import read_on


def watch_dir(rank: int) -> None:
    """Before the prewarm's first forward compiles the model."""
    from launcher.runtime import compile_dir

    try:
        compile_dir.install()
    except Exception as exc:  # another vLLM: the pieces stay where vLLM puts them
        logger.warning("b12x-launch rank %d: vLLM's compile directory unwatched: %r", rank, exc)


def link_dir(runner: Any, rank: int) -> bool:
    """A boot that compiled vLLM's model links its pieces where a warm boot will look;
    False when nothing was compiled yet to link."""
    from launcher.runtime import compile_dir

    if runner is None:
        return False
    try:
        model = runner.get_model() if hasattr(runner, "get_model") else runner.model
        drafter = read_on("drafter.model", read_on("runner.drafter", runner))
        parts = compile_dir.compiled_parts(model, drafter)
        if not parts:  # nothing compiled here (loaded, eager, or vLLM's CPU backend)
            return False
        done = compile_dir.link_for_warm_boots(parts)
    except Exception as exc:  # the pieces stay where vLLM put them; the boot goes on
        logger.warning("b12x-launch rank %d: compiled pieces not linked: %r", rank, exc)
        return True
    if isinstance(done, str):
        logger.warning("b12x-launch rank %d: compiled pieces not linked: %s", rank, done)
    else:
        say(f"rank {rank}: {done.say()}")
    return True


def say_key(run: RunPlan, rank: int) -> None:
    """On a boot from a cache artifact: whether vLLM loaded its compiled graph from it or
    compiled again, and which factor of its key differs; then Inductor's cache, if read."""
    from launcher.runtime import compile_key

    say_artifact_key(run, rank)
    if said := compile_key.inductor_cache_line():
        say(f"rank {rank}: {said}")


def say_artifact_key(run: RunPlan, rank: int) -> None:
    """Whether vLLM loaded its compiled graph from the cache artifact, or which factor of its
    key made it compile again (nothing on a boot from no artifact)."""
    from launcher.runtime import compile_key

    artifact = run.file.artifact
    if artifact is None or artifact.state == "ignored" or not artifact.artifact_id:
        return
    try:
        found = compile_key.after_restore(run.cache_root, artifact.artifact_id, run.written_at)
    except OSError as exc:  # a cache being rewritten under us: nothing to tell
        logger.warning("b12x-launch rank %d: vLLM's compile key unread: %s", rank, exc)
        return
    if found is None:
        return
    line = f"rank {rank}: {found.say(artifact.artifact_id)}"
    if found.loaded:
        say(line)
    else:
        logger.warning("b12x-launch %s", line)
