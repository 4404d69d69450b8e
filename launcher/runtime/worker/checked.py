"""The planned worker's first step: every declared vLLM internal (``launcher.vllm``) this
deployment needs is resolved on the installed vLLM before vLLM loads the weights. A missing
one is a named refusal, or a named downgrade that is logged and recorded, never a silent
default found halfway through the boot."""

from __future__ import annotations

import logging
from typing import Any

from launcher.contract.record import InternalsCheck
from launcher.runtime.worker.runplan import RunPlan
from launcher.vllm import check
from launcher.vllm.internals import LOGGER

logger = logging.getLogger(LOGGER)


def internals_first(platform: str, rank: int) -> InternalsCheck | None:
    """The check for the run file's deployment (None: no run file, plain vLLM). Raises
    ``RuntimeError`` naming the missing internal where the deployment cannot boot."""
    run = RunPlan.from_env()
    if run is None:
        return None
    deployment = run.deployment
    try:
        found = check.before_weights(
            platform,
            deployment.prewarm,
            bool(deployment.runtime.markers),  # a fork line: its own backends and warmups
            run.profile.prewarm.strict_jit,
        )
    except check.InternalsRefused as exc:
        raise RuntimeError(
            f"b12x-launch rank {rank}: refused before the weights load: {exc}"
        ) from None
    for line in check.downgrade_lines(found):
        logger.warning("b12x-launch rank %d: %s", rank, line)
    return InternalsCheck.model_validate(found, from_attributes=True)


class CheckedFirst:
    """Before ``PlannedMixin`` in a planned worker's bases: ``load_model`` checks first;
    the check goes into the rank record once the worker has made it."""

    _internals: InternalsCheck | None = None

    def load_model(self, *args: Any, **kwargs: Any) -> Any:
        platform = self.platform  # type: ignore[attr-defined]
        self._internals = internals_first(platform, self.rank)  # type: ignore[attr-defined]
        return super().load_model(*args, **kwargs)  # type: ignore[misc]

    def determine_available_memory(self) -> int:
        budget = super().determine_available_memory()  # type: ignore[misc]
        state = self._state  # type: ignore[attr-defined]
        if state is not None and self._internals is not None:
            state.sized.internals = self._internals
            state.save()
        return budget
