"""Deployment profiles: the schema, loading (``extends:``, ``--set``) and coupling rules."""

from launcher.profile.load import LoadedProfile, load_profile
from launcher.profile.schema import Profile

__all__ = ["LoadedProfile", "Profile", "load_profile"]
