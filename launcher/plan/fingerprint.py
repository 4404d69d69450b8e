"""A short, stable hash of the inputs that decide a plan (as vLLM's ``compute_hash``)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from launcher.profile.schema import Profile
from launcher.secrets import is_secret

# Ignored: they change no byte of memory or compiled code.
#   name, description   labels for humans
#   model.served_name   what clients call the model
#   serving.host/port   where it listens
#   runtime             where caches and records live, not what is in them
#   prewarm.strict_jit  whether a late compile is fatal, not whether it happens
#   hardware.reserved_by_others  what other processes hold is the machine's state, not the
#                       deployment's (a launch raises it to what the cards show); keying on it
#                       would hide a run's measurements from the next plan
#   qualify             the workload qualify drives, not the deployment it drives it through
#                       (the qualified record keeps the workload it survived)
#   secret env values   never hashed, never stored
IGNORED = (
    ("name",),
    ("description",),
    ("model", "served_name"),
    ("serving", "host"),
    ("serving", "port"),
    ("runtime",),
    ("prewarm", "strict_jit"),
    ("hardware", "reserved_by_others"),
    ("qualify",),
)


def profile_fingerprint(profile: Profile, extra: dict[str, Any] | None = None) -> str:
    """12 hex digits of SHA-256 over the profile's memory-relevant fields plus ``extra``."""
    data = profile.model_dump(mode="json")
    for path in IGNORED:
        node = data
        for key in path[:-1]:
            node = node.get(key, {})
        node.pop(path[-1], None)
    data["env"] = {k: v for k, v in data["env"].items() if not is_secret(k)}
    if extra:
        data["_extra"] = extra
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
