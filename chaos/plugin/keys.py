"""The plugin's shared state: the keys of what it keeps in pytest's stashes, and its environment variables."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    from chaos.run.locks import RunDirs

RUN_IDS = pytest.StashKey[list[str]]()
REPORT = pytest.StashKey[dict[str, pytest.TestReport]]()
HTML_REPORTS = pytest.StashKey[list[str]]()
HTML_INDEX = pytest.StashKey[str]()
RUNNING = pytest.StashKey[tuple[pytest.Item, dict[str, object]]]()
"""The test between its setup and teardown reports, with its fixture values (pytest clears them before an
interrupted session's end): the one an interrupt cut short."""
INTERRUPTED = pytest.StashKey[bool]()
"""Set by Ctrl-C or SIGTERM, before the fixtures' teardown: they then heal, but do not wait for a
cluster the session is about to remove."""
SPARK_OWNED = pytest.StashKey[bool]()
"""Whether this session started the process's Spark JVM (then its finish stops it)."""
RUN_DIRS: pytest.StashKey[RunDirs] = pytest.StashKey()
ENV_SEED = "CHAOS_SEED"
ENV_REPORT_DIR = "CHAOS_REPORT_DIR"
ENV_GROUP_PROTOCOL = "CHAOS_GROUP_PROTOCOL"
ENV_AUDIT_ENGINE = "CHAOS_AUDIT_ENGINE"
ENV_CLIENT = "CHAOS_CLIENT"
AUDIT_ENGINES = ("spark", "reference")
SIGTERM_BEFORE: pytest.StashKey[Callable[[int, FrameType | None], object] | int | None] = pytest.StashKey()
