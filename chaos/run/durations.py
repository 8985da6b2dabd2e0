"""Durations as users type them: ``60`` (seconds), ``90s``, ``5m``, ``1h``, ``1.5m``."""

from __future__ import annotations

import re
from typing import Final

from chaos.errors import ConfigError

_DURATION: Final = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", re.IGNORECASE)
_UNIT_S: Final = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in ``text``; a :class:`~chaos.errors.ConfigError` saying the accepted forms otherwise."""
    match = _DURATION.fullmatch(text)
    seconds = float(match.group(1)) * _UNIT_S[match.group(2).lower()] if match else 0.0
    if seconds <= 0:
        raise ConfigError(
            f"duration {text!r}: expected a positive number of seconds, or one with a unit: 60, 90s, 5m, 1h"
        )
    return seconds
