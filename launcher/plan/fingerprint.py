"""A short, stable hash of the inputs that decide a plan (as vLLM's ``compute_hash``)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from launcher.profile.schema import Profile, Reader, unread_paths, without_unread
from launcher.secrets import secret_env

IGNORED = unread_paths(Reader.FINGERPRINT)
"""The keys not hashed, each marked on its schema field with why (``Unread``): labels, where
the server listens and keeps its files, whether a late compile is fatal, what other processes
hold, qualify's workload. Secret ``env`` values are never hashed either (below)."""


ADDED_AT_DEFAULT = {
    ("serving", "max_logprobs"): 20,
    ("serving", "prompt_logprobs"): "reserve",
    ("prewarm", "early_keys"): True,
    ("prewarm", "sampler_ahead"): True,
    ("prewarm", "inductor_pool"): "auto",
}
"""Keys added after deployments had records: hashed only where a profile sets them away from
their default, so a profile that does not use them keeps its fingerprint (and its records).
The prewarm switches were environment variables (``BLAUNCH_EARLY_KEYS`` ...) whose defaults
every record was measured under; each changes what the stage compiles ahead and when."""


def profile_fingerprint(profile: Profile, extra: dict[str, Any] | None = None) -> str:
    """12 hex digits of SHA-256 over the profile's memory-relevant fields plus ``extra``."""
    data = without_unread(profile.model_dump(mode="json"), Reader.FINGERPRINT)
    data["env"] = {k: v for k, v in data["env"].items() if not secret_env(k, v)}
    for (section, key), default in ADDED_AT_DEFAULT.items():
        if data.get(section, {}).get(key) == default:
            del data[section][key]
    if extra:
        data["_extra"] = extra
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
