"""Deployment profiles: the schema, loading (``extends:``, ``--set``) and coupling rules."""

# First, before load's and schema's pydantic imports: pydantic-core without asyncio.
import launcher.profile.lean_import  # noqa: F401
from launcher.profile.load import LoadedProfile, load_profile
from launcher.profile.schema import Profile

__all__ = ["LoadedProfile", "Profile", "load_profile"]
