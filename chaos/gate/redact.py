"""Secrets never leave the process: the one function that masks them wherever a configuration is written
(``gate.json``, ``gate.md``, JUnit, and any caller that records a client configuration). Which keys are
secret is :func:`chaos.gate.gatefile.is_secret`'s rule (the lint prints them masked the same way)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, TypeVar

from chaos.gate.gatefile import is_secret

MASK: Final = "***"

V = TypeVar("V")

__all__ = ["MASK", "is_secret", "redact"]


def redact(config: Mapping[str, V]) -> dict[str, V | str]:
    """``config`` with the value of every secret key (``sasl.password``, ``ssl.key.password``,
    ``*secret*``, ``*password*``, ``sasl.jaas.config``, ``*token*``, ``*.pem``…) replaced by ``***``; nested
    mappings are redacted too. Key order is kept."""
    out: dict[str, V | str] = {}
    for key, value in config.items():
        if is_secret(key):
            out[key] = MASK
        elif isinstance(value, Mapping):
            out[key] = redact(value)  # type: ignore[assignment]  # a nested mapping of the same shape
        else:
            out[key] = value
    return out
