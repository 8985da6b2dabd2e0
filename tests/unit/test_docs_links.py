"""The user docs hold together: every relative link in README.md and docs/*.md resolves to a file (and an
``#anchor`` into a Markdown file to a heading GitHub would generate), and the docs describe the product, not
its making — working-session labels, work-item numbers and commit hashes live only in docs/measurements.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]
DOCS: Final = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
MEASUREMENTS: Final = ROOT / "docs" / "measurements.md"

_FENCE: Final = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.DOTALL | re.MULTILINE)
_CODE_SPAN: Final = re.compile(r"(`+)(?:(?!\1).)+?\1")
_LINK: Final = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING: Final = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.MULTILINE)

#: The acceptance pattern: ``grep -rnE "<this>" README.md docs/`` may hit docs/measurements.md only.
HISTORY: Final = re.compile(r"[Ss]ession [0-9]|[Ii]ssue [0-9]+|\b[0-9a-f]{7,40}\b")

#: Tokens the hash alternative matches that are not hashes: decimal numbers the docs must quote as they are.
NOT_HASHES: Final = frozenset(
    {
        "2147483647",  # librdkafka's default retries (INT32_MAX), quoted by the gate's lint
        "2147483646",  # the Java producer's "(2147483646 attempts left)" log line
        "1000000",  # librdkafka's default max.in.flight.requests.per.connection, quoted by the gate's lint
        "3000000",  # make bench's record counts, in docs/audit.md's command line
        "5000000",
        "10000000",
        "2086958710",  # the Makefile's fixed CHAOS_SEED
        "604800000",  # Kafka's default retention.ms and segment.ms (7 days), in docs/gate.md's [topic] table
        "86400000",  # Kafka's default delete.retention.ms (1 day)
        "1048576",  # segment.bytes' lower bound (1 MiB)
        "1073741824",  # Kafka's default segment.bytes (1 GiB)
        "1048588",  # Kafka's default max.message.bytes
        "1768478400",  # epoch seconds in docs/report.md's scenario.json example
        "1768478463",  # the same example's ended_ts
    }
)


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code (links there are examples, not links)."""
    without_fences = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return _CODE_SPAN.sub("", without_fences)


def slug(heading: str) -> str:
    """The anchor GitHub generates for a heading's text (before de-duplication)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a Markdown file's headings, with GitHub's ``-1``, ``-2`` for repeated ones."""
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found: set[str] = set()
    for match in _HEADING.finditer(text):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def _links(path: Path) -> list[tuple[int, str]]:
    prose = _prose(path.read_text(encoding="utf-8"))
    return [(prose.count("\n", 0, m.start()) + 1, m.group(1)) for m in _LINK.finditer(prose)]


def test_the_slugs_are_githubs() -> None:
    assert slug("The audit (`chaos.audit`) and the verdict (`chaos.audit.verdict`)") == (
        "the-audit-chaosaudit-and-the-verdict-chaosauditverdict"
    )
    assert slug("2026-12-01 — `make test`, third machine") == "2026-12-01--make-test-third-machine"
    assert slug("Order checks (Jepsen's names)") == "order-checks-jepsens-names"
    java = "the-java-client-chaosworkloadjava_clientpy"
    assert slug("The Java client (`chaos/workload/java_client.py`)") == java


def test_every_relative_link_resolves() -> None:
    broken = []
    for doc in DOCS:
        for line, target in _links(doc):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, …
                continue
            where, _, anchor = target.partition("#")
            file = (doc.parent / where).resolve() if where else doc
            name = f"{doc.relative_to(ROOT)}:{line}: {target}"
            if not file.exists():
                broken.append(f"{name} (no such file)")
            elif ROOT not in file.parents and file != ROOT:
                broken.append(f"{name} (outside the repository)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{name} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_no_doc_links_outside_the_repository() -> None:
    for doc in DOCS:
        assert "../shared" not in doc.read_text(encoding="utf-8"), doc


def test_history_words_only_in_the_measurements() -> None:
    hits = []
    for doc in DOCS:
        if doc == MEASUREMENTS:
            continue
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            tokens = [m.group(0) for m in HISTORY.finditer(line) if m.group(0) not in NOT_HASHES]
            if tokens:
                hits.append(f"{doc.relative_to(ROOT)}:{number}: {tokens}")
    assert not hits, "history in the user docs (move it to docs/measurements.md):\n" + "\n".join(hits)


def test_the_measurements_are_newest_first() -> None:
    dates = re.findall(r"^## (\d{4}-\d{2}-\d{2}) ", MEASUREMENTS.read_text(encoding="utf-8"), re.MULTILINE)
    assert dates, "docs/measurements.md has no dated section"
    assert dates == sorted(dates, reverse=True)
