"""Environment switches that became profile keys, refused wherever they are still set.

Four ``BLAUNCH_*`` variables once changed the workers' prewarm stage outside the typed,
fingerprinted profile (issue 65). The workers read the ``prewarm.*`` keys now, so a variable
left in the launch's environment or in the profile's ``env:`` would be dropped without a word;
it is refused instead, naming the key to set and the value that keeps what it asked for.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from launcher.profile.schema import Profile
from launcher.switches import OFF, ON

RETIRED = {
    "BLAUNCH_EARLY_KEYS": "prewarm.early_keys",
    "BLAUNCH_SAMPLER_AHEAD": "prewarm.sampler_ahead",
    "BLAUNCH_INDUCTOR_POOL": "prewarm.inductor_pool",
    "BLAUNCH_COMPILE_TIMES": "prewarm.compile_times",
}
"""Each retired variable and the profile key that replaced it."""


def key_value(name: str, value: str) -> str:
    """What the variable's value was read as, written as the key's value."""
    v = value.strip().lower()
    if name == "BLAUNCH_INDUCTOR_POOL":
        return "0" if v in OFF or v == "1" else v if v.isdigit() else "auto"
    on = name != "BLAUNCH_COMPILE_TIMES"  # the default each switch had when unset or unread
    return "true" if v in ON or (on and v not in OFF) else "false"


def message(name: str, value: str, where: str) -> str:
    key = RETIRED[name]
    return (
        f"{name} is set {where}, and the workers no longer read it: set {key}: "
        f"{key_value(name, value)} in the profile (or --set {key}={key_value(name, value)}) "
        f"and remove {name}"
    )


def in_profile_env(p: Profile) -> Iterator[tuple[str, str]]:
    """A settings check: the profile's ``env:`` passes a retired variable to the workers."""
    for name in sorted(n for n in RETIRED if p.env.get(n, "").strip()):
        yield f"env.{name}", message(name, p.env[name], "in the profile's env")


def in_environment(env: Mapping[str, str]) -> list[str]:
    """Why the launch's environment ``env`` is refused: one line per retired variable set (an
    empty one meant the default, as it does now)."""
    named = sorted(n for n in RETIRED if env.get(n, "").strip())
    return [message(n, env[n], "in the environment") for n in named]
