"""Keep secrets out of everything the launcher prints or writes: one redaction for all of it.

A value is secret when its name says so: an environment variable (``HF_TOKEN``,
``WANDB_KEY``), a vLLM option as vLLM's parser reads it (``--api-ke`` is ``--api-key``), a
dotted sub-key or a key inside a JSON value (``--kv-transfer-config '{"api_key": ...}'``), or a
key anywhere in a ``--set``/``--vary`` value (``env={HF_TOKEN: ...}``). Names are matched on
their parts, so ``HF_HUB_TOKEN``, ``VLLM_API_KEY`` and ``WANDB_KEY`` are secret and
``SSL_KEYFILE`` (a path) is not; a name whose last part is ``PAT`` (``GITHUB_PAT``) is a token.

A value is secret by its shape too, whatever its name (``secret_value``): a URL with userinfo
(``https://user:pw@host``, ``https://TOKEN@host``, a proxy's ``user:pw@host:port``), a
``name=value`` pair whose name is secret (``?access_token=...``), or JSON or YAML holding a
secret key (``{"api_key": ...}``, ``password: ...``). A variable with such a value is a secret
variable (``secret_env``). Where a secret would sit in a process's argv (every user of the
machine reads it in ``ps``), the profile's checks refuse it; what reaches a file, an argv or a
printed line anyway goes through ``redact_argv``, ``redact_env`` or ``redact_data``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import yaml

from launcher.vllm.options import Item, OptionTable, load_table, resolve

_PARTS = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_SECRET_INSIDE = ("SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "PRIVATE")
_SECRET_PARTS = frozenset(
    {"AUTH", "OAUTH", "AUTHORIZATION", "BEARER", "CREDENTIAL", "CREDENTIALS", "COOKIE", "DSN"}
)
_SECRET_ENDINGS = ("TOKEN", "KEY", "KEYS")
_SECRET_LAST = frozenset({"PASS", "PAT", "PATS", "PWD"})
_TOKENS = re.compile(r"[\s,;=\"'<>()\[\]{}]+")
"""What separates the words a URL or a ``user:pw@host`` may be (split once: linear)."""
_PAIRS = (
    re.compile(r"(?<![A-Za-z0-9_.-])([A-Za-z_][A-Za-z0-9_.-]*)=[^\s=]"),
    re.compile(r"[\"']([A-Za-z_][A-Za-z0-9_.-]*)[\"']\s*:"),
    re.compile(r"(?m)^[ \t]*([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:[ \t]*\S"),
)
"""A name given a value: ``name=value`` (a query string, a DSN's options), ``"name": value``
(JSON, whole or not) and ``name: value`` at a line's start (YAML, a header): secret when the
name is. A name starts only where no name character precedes it (each word scanned once), and
``name = value`` with spaces (a template's ``{% set eos_token = ... %}``) is no pair."""
_SHAPE_LIMIT = 1 << 16
"""Longer values are not parsed as JSON or YAML (their pairs and URLs are still read)."""
SECRET_VARIABLES: dict[str, str] = {"api_key": "VLLM_API_KEY", "hf_token": "HF_TOKEN"}
"""vLLM options (by ``dest``) that carry a secret, and the variable that carries it instead
(a process's argv is readable by every user of the machine; its environment is not)."""
MASK = "***"


def is_secret(name: str) -> bool:
    """Whether a variable, option or key named ``name`` holds a secret, by the parts of its
    name (split at ``_ - .`` and camel case): one holds SECRET, PASSWORD, PASSWD, PASSPHRASE
    or PRIVATE, or is AUTH, AUTHORIZATION, BEARER, CREDENTIAL(S), COOKIE or DSN, or the last
    ends in TOKEN, KEY or KEYS, or is PASS. So ``HF_TOKEN``, ``HF_HUB_TOKEN``, ``VLLM_API_KEY``,
    ``WANDB_KEY`` and ``hfToken`` are secret; ``max_num_batched_tokens``,
    ``long_prefill_token_threshold``, ``tokenizer`` and ``SSL_KEYFILE`` (a path) are not."""
    parts = [p.upper() for p in _PARTS.split(str(name)) if p]
    if not parts:
        return False
    if any(s in p for p in parts for s in _SECRET_INSIDE) or _SECRET_PARTS & set(parts):
        return True
    return parts[-1].endswith(_SECRET_ENDINGS) or parts[-1] in _SECRET_LAST


def secret_value(value: object, depth: int = 0) -> bool:
    """Whether ``value`` holds a secret by its shape, whatever it is called: a URL's userinfo,
    a ``name=value`` or ``name: value`` pair whose name is secret, or JSON or YAML holding a
    secret key or such a value (``{"api_key": ...}``, ``password: ...``)."""
    if not isinstance(value, str) or not value.strip():
        return False
    if _has_userinfo(value):
        return True
    if any(is_secret(name) for name in {n for p in _PAIRS for n in p.findall(value)}):
        return True
    if depth > 2 or len(value) > _SHAPE_LIMIT or not any(c in value for c in "{[:"):
        return False
    try:
        data = yaml.safe_load(value)  # JSON is YAML; a string that is neither is plain text
    except (yaml.YAMLError, ValueError, RecursionError):
        return False
    if isinstance(data, str):
        return False
    return secret_in_data(data, depth + 1)


def _has_userinfo(value: str) -> bool:
    """A URL with userinfo (``scheme://user:pw@host``, ``scheme://TOKEN@host``) or a proxy's
    ``user:pw@host``; not ``git@host:repo`` nor an e-mail address."""
    for word in _TOKENS.split(value):
        head, at, _ = word.partition("@")
        if not at or not head:
            continue
        scheme, sep, info = head.partition("://")
        if sep:
            if info and "/" not in info and scheme[:1].isalpha():
                return True
        elif ":" in head and "/" not in head:
            return True
    return False


def secret_in_data(data: Any, depth: int = 0) -> bool:
    """Whether ``data`` (parsed JSON or YAML) holds a secret key or a secret-shaped string."""
    if next(secret_paths(data), None) is not None:
        return True
    stack, seen = [data], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
        elif isinstance(node, str) and secret_value(node, depth):
            return True
    return False


def secret_env(name: str, value: object) -> bool:
    """Whether a variable is a secret: by its name, or by its value's shape."""
    return is_secret(str(name)) or secret_value(value)


def secret_paths(data: Any, prefix: str = "") -> Iterator[str]:
    """Dotted paths of every mapping key in ``data`` whose name is secret (``env.HF_TOKEN``)."""
    stack = [(data, prefix)]
    seen: set[int] = set()
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            for key, value in node.items():
                sub = f"{path}.{key}" if path else str(key)
                if is_secret(str(key)):
                    yield sub
                else:
                    stack.append((value, sub))
        elif isinstance(node, list | tuple):
            stack.extend((v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(node))


def names_a_secret(data: Any, key: str = "") -> bool:
    """Whether ``data`` set at the dotted ``key`` holds a secret: the key's own parts, or a
    key anywhere inside the value."""
    if any(is_secret(part) for part in key.split(".") if part):
        return True
    argv = isinstance(data, list | tuple) and all(isinstance(v, str) for v in data)
    if argv and secret_argv(list(data)):
        return True
    return secret_in_data(data) if not isinstance(data, str) else secret_value(data)


def redact_data(data: Any) -> Any:
    """``data`` with the value of every secret key masked (a copy; lists and maps walked)."""
    if isinstance(data, dict):
        return {
            k: (MASK if _secret_entry(k, v) and v not in (None, "") else redact_data(v))
            for k, v in data.items()
        }
    if isinstance(data, list | tuple):
        return [redact_data(v) for v in data]
    return MASK if secret_value(data) else data


def _secret_entry(key: object, value: object) -> bool:
    return is_secret(str(key)) or (isinstance(value, str) and secret_value(value))


def drop_secrets(data: Any) -> Any:
    """``data`` without any secret key (a copy): for a file shipped to another machine."""
    if isinstance(data, dict):
        return {k: drop_secrets(v) for k, v in data.items() if not _secret_entry(k, v)}
    if isinstance(data, list | tuple):
        return [drop_secrets(v) for v in data if not secret_value(v)]
    return data


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: (MASK if secret_env(k, v) and v else v) for k, v in env.items()}


def secret_item(item: Item) -> bool:
    """Whether an option of an argument list (as vLLM's parser reads it) carries a secret in
    its value: a secret option, a secret dotted sub-key, or a secret key in a JSON value."""
    if not item.values:
        return False
    name = item.dest or item.typed.lstrip("-").partition("=")[0].split(".")[0]
    if is_secret(name) or any(is_secret(k) for k in item.subkeys):
        return True
    for value in item.values:
        if secret_value(value):
            return True
        if value.lstrip()[:1] in ("{", "["):
            try:
                parsed = json.loads(value)
            except ValueError:
                continue
            if secret_in_data(parsed):
                return True
    return False


def secret_argv(argv: list[str], table: OptionTable | None = None) -> bool:
    """Whether an argument list carries a secret: an option that does (as vLLM reads it), or
    any word of a secret shape (a positional URL with userinfo)."""
    words = [str(a) for a in argv]
    if any(secret_value(w) for w in words):
        return True
    return any(secret_item(item) for item in resolve(words, table or load_table()).items)


def redact_argv(argv: list[str], table: OptionTable | None = None) -> list[str]:
    """``argv`` with the value of every option that carries a secret masked; options are read
    as vLLM reads them (abbreviations, ``=``, dotted sub-keys, JSON values)."""
    out = [_masked_word(str(a)) for a in argv]
    for item in resolve(out, table or load_table()).items:
        if not secret_item(item):
            continue
        for at in item.value_at:
            if at < 0:
                out[item.first] = out[item.first].partition("=")[0] + "=" + MASK
            else:
                out[at] = MASK
    return out


def _masked_word(word: str) -> str:
    """``word`` masked when its shape holds a secret (``--opt=`` kept, so the option shows)."""
    if not secret_value(word):
        return word
    head, eq, _ = word.partition("=")
    return f"{head}={MASK}" if word.startswith("-") and eq and not secret_value(head) else MASK
