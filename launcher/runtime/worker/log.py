"""The planned worker's log lines: on vLLM's logger, each led by ``b12x-launch``."""

from __future__ import annotations

import logging

from launcher.vllm.internals import LOGGER

logger = logging.getLogger(LOGGER)


def say(message: str) -> None:
    logger.info("b12x-launch %s", message)


def warn(message: str) -> None:
    logger.warning("b12x-launch: %s", message)


def delta(actual: int, planned: int) -> str:
    """``actual`` against the plan's figure, in words."""
    if not planned:
        return "no plan figure"
    return f"{(actual - planned) / planned:+.1%} against the plan"
