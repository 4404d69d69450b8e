"""What plans of many profiles in one process share: facts gathered once per key set.

A sweep plans every combination with ``pipeline.make_plan``, as a dry run does; what makes it
fast is handing ``make_plan`` a :class:`SharedInputs`. The facts (model, GPU kind, weights
per rank) are gathered once per distinct value of the keys ``gather()`` reads: every key
but those the schema marks unread by the facts (``Reader.FACTS``). The installed packages'
versions that calibration records are checked against are looked up once too.
"""

from __future__ import annotations

import json
from dataclasses import replace

from launcher.deployment import Deployment
from launcher.plan.inputs import check_against_facts, gather
from launcher.plan.planner import Measured, PlanInputs
from launcher.profile import LoadedProfile, Profile
from launcher.profile.schema import Reader, without_unread


class SharedInputs:
    """Gathered facts by what ``gather()`` reads, and this machine's stack versions."""

    def __init__(self) -> None:
        self._facts: dict[str, PlanInputs] = {}
        self._versions: dict[str, str | None] | None = None
        self.gathered = 0
        """How many times the facts were gathered (the other plans re-used them)."""

    def inputs(
        self,
        loaded: LoadedProfile,
        deployment: Deployment,
        *,
        b12x_sizing: bool = False,
        measured: dict[int, Measured] | None = None,
    ) -> PlanInputs:
        """``gather(loaded, deployment, ...)``, from facts already gathered for the same key.

        Raises:
            ProfileError: as ``gather`` (the settings are checked against the facts each time).
        """
        key = fact_key(loaded.profile)
        cached = self._facts.get(key)
        if cached is None:
            cached = self._facts[key] = gather(loaded, deployment)
            self.gathered += 1
        else:  # gather() refuses settings the model cannot take; so must a re-use
            check_against_facts(loaded, cached.facts, cached.gpu, deployment.runtime)
        workspaces = None
        if b12x_sizing:  # sized for this deployment, not the one the facts were gathered for
            from launcher.plan.b12x_sizing import size_workspaces

            workspaces = size_workspaces(deployment, cached.facts)
        return replace(
            cached, deployment=deployment, measured=measured or {}, workspaces=workspaces
        )

    def versions(self) -> dict[str, str | None]:
        """The installed stack's versions (``calibration.stack_versions``), read once."""
        if self._versions is None:
            from launcher.plan.calibration import stack_versions

            self._versions = stack_versions()
        return self._versions


def fact_key(p: Profile) -> str:
    """The profile less the keys the facts do not depend on: two profiles with the same key
    have the same facts. MTP on or off changes the weights (its layer), the number of draft
    tokens does not."""
    data = without_unread(p.model_dump(mode="json"), Reader.FACTS)
    data["_mtp"] = p.mtp_tokens > 0
    return json.dumps(data, sort_keys=True)
