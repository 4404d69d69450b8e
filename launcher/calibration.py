"""Measurements kept between runs, keyed by the plan's fingerprint."""

from __future__ import annotations

from launcher.plan import Measured
from launcher.profile.schema import Profile


def load_measured(profile: Profile, fingerprint: str) -> dict[int, Measured]:
    """Measured figures by rank for this fingerprint (none yet: filled by a run)."""
    return {}
