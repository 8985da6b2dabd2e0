"""Write docs/scenarios.md from the scenario modules' docstrings (``make docs``).

Each scenario's story — the case, the fault timeline, the variants, the expected symptoms and verdicts —
is written once, in its module's docstring under ``scenarios/``, and docs/scenarios.md is generated from
them, not the reverse. The docstring is the simpler home: it sits next to the code it describes (a change of
the timeline and of its description is one diff), it ships with the package (``chaos.catalog``), so a user's
``help()`` shows it, and the script only has to read text (``ast``, nothing imported) and touch up its
markup; the reverse would mean parsing Markdown into Python source. The page's fixed part (the framework,
the verdict and evidence rules, the table of cases) is ``scripts/scenarios_doc_head.md``.

``python scripts/scenarios_doc.py`` writes the page; ``--check`` exits 1 when the committed page differs
from what it would write (``tests/unit/scenario/test_scenarios_doc.py`` checks the same).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
SCENARIOS: Final = ROOT / "scenarios"
HEAD: Final = Path(__file__).resolve().parent / "scenarios_doc_head.md"
OUT: Final = ROOT / "docs" / "scenarios.md"

#: The page's order of cases: the catalog's (design-card cases, loss, duplication, ordering, the rest).
ORDER: Final = ("pb1", "pb4", "isr2", "isr3", "md1", "md2", "md3", "mpi1", "l1", "l2", "l6", "d1", "d3", "o1")
ORDER_TAIL: Final = ("o6", "rn1", "sv1")


def _rank(path: Path) -> tuple[int, str]:
    case = path.stem.split("_")[1]
    order = ORDER + ORDER_TAIL
    return (order.index(case) if case in order else len(order), path.name)


def _markdown(text: str) -> str:
    """A docstring's reStructuredText-ish markup as Markdown: literals, links to the other docs."""
    text = re.sub(r"``(.+?)``", r"`\1`", text)
    return re.sub(r"(?<![\w/.\[`])docs/([\w-]+\.md)", r"[docs/\1](\1)", text)


def section(path: Path) -> str:
    """One scenario's section: its case as the heading, the docstring's first line as the lead."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=True)
    if not doc:
        raise SystemExit(f"{path}: no module docstring")
    first, _, rest = doc.partition("\n")
    case = re.split(r" `| — ", first, maxsplit=1)[0].strip()
    lead = f"**{_markdown(first.strip())}** (`scenarios/{path.name}`)"
    return f"### {case}\n\n{lead}\n\n{_markdown(rest.strip())}\n"


def render() -> str:
    """The whole page."""
    files = sorted(SCENARIOS.glob("test_*.py"), key=_rank)
    parts = [HEAD.read_text(encoding="utf-8").rstrip() + "\n", *(section(f) for f in files)]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/scenarios.md is not up to date")
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != page:
            print(f"{OUT.relative_to(ROOT)} is stale: run `make docs`", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(page, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
