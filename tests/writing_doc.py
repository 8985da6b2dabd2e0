"""The smallest scenario of docs/writing-scenarios.md, read from the doc itself so that the tests which
run it (a unit collection test, the out-of-repo integration test) and the doc cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

DOC: Final = Path(__file__).resolve().parent.parent / "docs" / "writing-scenarios.md"
_PYTHON_BLOCK: Final = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def smallest_scenario(doc: Path = DOC) -> str:
    """The doc's first ```python block that defines a ``def test_`` function: a complete test file."""
    for block in _PYTHON_BLOCK.findall(doc.read_text(encoding="utf-8")):
        if re.search(r"^def test_", block, re.MULTILINE):
            return str(block)
    raise AssertionError(f"{doc}: no ```python block defines a `def test_` function")
