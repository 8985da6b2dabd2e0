"""The screenshots of docs/report.md, taken from a real run's page in headless Chromium (``make
screenshots`` runs L2's ``vulnerable`` variant first).

Usage: ``python scripts/report_screenshots.py TREE OUT_DIR`` — the newest ``report.html`` under ``TREE``
(a ``CHAOS_REPORT_DIR``) is shot in three parts: the banner and its story (``report-story.png``), the
first anomaly's examples (``report-examples.png``) and the fault windows with the first chart
(``report-charts.png``). Prints each part's height in pixels (the page at 1280 x 900).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import chromium, section_end  # noqa: E402

PARTS = (
    ("report-story.png", "#verdict", "#scenario"),
    ("report-examples.png", "h3[id^='examples-']", None),
    ("report-charts.png", "#timeline", "#chart-latency"),
)
"""Each file, from the top of one element to the top of another (``None``: the section that element's
heading opens): the banner and the story, the first anomaly's examples, the fault windows and the first
chart."""


def main(tree: Path, out: Path) -> int:
    pages = sorted(tree.resolve().rglob("report.html"), key=lambda p: p.stat().st_mtime)
    if not pages:
        print(f"no report.html under {tree}: run a scenario with CHAOS_REPORT_DIR={tree} first")
        return 2
    page_path = pages[-1]
    out.mkdir(parents=True, exist_ok=True)
    with chromium() as page:
        page.open(page_path.as_uri(), "document.body.getAttribute('data-charts-rendered') !== null")
        for name, start, until in PARTS:
            if not page.evaluate(f"document.querySelector({start!r}) !== null"):
                print(f"{name}: {page_path} has no {start}; not taken")
                continue
            end = until or section_end(start)
            height = page.element_screenshot(start, out / name, until=end)
            print(f"{out / name}: {height:.0f} px high (from {start} to {end}, of {page_path})")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
