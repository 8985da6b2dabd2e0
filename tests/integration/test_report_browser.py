"""Report pages in a real browser: Debian's headless Chromium loads the index and a scenario page from
file://, driven over the DevTools protocol (websocket-client). No console errors, every chart drawn by
Plotly loaded from the report tree's one copy (``<root>/assets/``), hostile strings inert (no dialog, no
extra script element, shown as text); a page copied without the tree says its charts are not drawn;
screenshots of both pages are saved under reports/."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.audit.verdict import AuditResult
from chaos.paths import reports_dir
from chaos.report import render_index, render_run
from chaos.report.assets import plotly_path, plotly_version
from tests.browser import Page, chromium
from tests.report_sample import HOSTILE, write_sample_run
from tests.story_check import contradictions

pytestmark = [pytest.mark.integration]

CHART_IDS = (
    "chart-produce",
    "chart-latency",
    "chart-consume",
    "chart-isr",
    "chart-leader",
    "chart-group",
    "chart-errors",
)


@pytest.fixture(scope="module")
def page() -> Iterator[Page]:
    with chromium() as driver:
        yield driver


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("report-root")
    write_sample_run(base / "runs" / "pb1-hostile", hostile=True)
    write_sample_run(base / "runs" / "pb1-crashed", crashed=True)
    for run in ("pb1-hostile", "pb1-crashed"):
        render_run(base / "runs" / run, root=base)
    render_index(base)
    return base


def screenshot_dir() -> Path:
    target = reports_dir() / "report-screenshots"
    target.mkdir(parents=True, exist_ok=True)
    return target


def test_scenario_page_renders_every_chart_without_console_errors(page: Page, root: Path) -> None:
    url = (root / "runs" / "pb1-hostile" / "report.html").as_uri()
    page.errors.clear()
    page.open(url, "document.body.getAttribute('data-charts-rendered') !== null")

    drawn = page.evaluate(
        "Object.fromEntries([...document.querySelectorAll('.chart')]"
        ".map(el => [el.id, el.querySelectorAll('svg.main-svg').length]))"
    )
    assert set(drawn) == set(CHART_IDS)
    assert all(count > 0 for count in drawn.values()), drawn
    assert page.evaluate("document.body.getAttribute('data-charts-rendered')") == str(len(CHART_IDS))
    assert page.errors == []

    # drawn by the tree's one plotly.js, loaded through a relative path
    assert page.evaluate("document.querySelector('script[src]').getAttribute('src')").startswith("../../")
    assert page.evaluate("document.querySelector('script[src]').src") == plotly_path(root).as_uri()
    assert page.evaluate("window.Plotly.version") == plotly_version()
    assert page.evaluate("document.getElementById('charts-missing').hidden") is True

    # the hostile strings did nothing and read as text, in the HTML and inside the charts
    assert page.dialogs == []
    assert page.evaluate("document.scripts.length") == 3
    assert HOSTILE in page.evaluate("document.querySelector('#verdict').closest('main').innerText")
    legend = page.evaluate("document.querySelector('#chart-consume .legend').textContent")
    assert HOSTILE in legend
    annotation = page.evaluate("document.querySelector('#chart-produce .annotation').textContent")
    assert HOSTILE in annotation
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 1280

    page.screenshot(screenshot_dir() / "scenario-page.png")


OVERLAPPING_LABELS = """[...document.querySelectorAll('.chart')].map(chart => {
     const boxes = [...chart.querySelectorAll('g.annotation')]
       .filter(a => a.style.display !== 'none').map(a => a.getBoundingClientRect());
     return boxes.filter((a, i) => boxes.slice(i + 1).some(b =>
       a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom)).length;
   })"""
"""Per chart of the page, how many visible window labels touch another one."""

SCREEN_PX = 900
"""The browser window's height (``--window-size``): one screen."""


def test_the_story_leads_and_window_labels_never_overlap(page: Page, root: Path) -> None:
    """ "What happened" comes right after the banner; each chart's window lane draws its labels apart."""
    page.open(
        (root / "runs" / "pb1-hostile" / "report.html").as_uri(),
        "document.body.getAttribute('data-charts-rendered') !== null",
    )
    order = page.evaluate("[...document.querySelectorAll('main > section, main > h2')].map(e => e.id)")
    assert order[:2] == ["verdict", "story"], order
    assert "The audit found 2 acknowledged writes lost" in page.evaluate(
        "document.querySelector('#story').innerText"
    )
    overlaps = page.evaluate(OVERLAPPING_LABELS)
    assert len(overlaps) == len(CHART_IDS)
    assert not any(overlaps), overlaps


def test_a_quoted_seed_line_in_chinese_is_drawn_with_a_cjk_font(page: Page, root: Path) -> None:
    """The seed's symptom is quoted in Chinese: the page says its language, and Chromium draws every Han
    character of it with a CJK font (Debian's fonts-noto-cjk), not as missing-glyph boxes."""
    page.open((root / "runs" / "pb1-hostile" / "report.html").as_uri(), "document.readyState === 'complete'")
    assert page.evaluate("document.documentElement.lang") == "en"
    assert page.evaluate("document.querySelector('blockquote.symptom').lang") == "zh"
    text = page.evaluate("document.querySelector('blockquote.symptom').textContent")
    han = sum(1 for ch in text if "\u3400" <= ch <= "\u9fff")
    assert han >= 10
    page.call("DOM.enable")
    page.call("CSS.enable")
    document = page.call("DOM.getDocument", depth=-1)
    node = page.call("DOM.querySelector", nodeId=document["root"]["nodeId"], selector="blockquote.symptom")
    fonts = page.call("CSS.getPlatformFontsForNode", nodeId=node["nodeId"])["fonts"]
    cjk = [f for f in fonts if "CJK" in f["familyName"]]
    assert cjk, f"no CJK font drew the seed's symptom (fonts: {fonts}); install Debian's fonts-noto-cjk"
    assert sum(f["glyphCount"] for f in cjk) >= han, fonts


def test_index_and_crashed_run_render(page: Page, root: Path) -> None:
    page.errors.clear()
    page.open((root / "index.html").as_uri(), "document.readyState === 'complete'")
    rows = page.evaluate("[...document.querySelectorAll('table.runs tr')].length")
    assert rows == 3  # header + 2 runs
    links = page.evaluate("[...document.querySelectorAll('table.runs a')].map(a => a.href)")
    assert sorted(link.rsplit("/", 2)[-2] for link in links) == ["pb1-crashed", "pb1-hostile"]
    assert page.errors == []
    page.screenshot(screenshot_dir() / "index-page.png")

    crashed = next(link for link in links if "pb1-crashed" in link)
    page.open(crashed, "document.body.getAttribute('data-charts-rendered') !== null")
    assert "This report is incomplete" in page.evaluate("document.body.innerText")
    assert page.errors == []
    page.screenshot(screenshot_dir() / "scenario-page-crashed.png")


def test_a_page_copied_without_its_tree_says_the_charts_are_not_drawn(
    page: Page, root: Path, tmp_path: Path
) -> None:
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(root / "runs" / "pb1-hostile" / "report.html", alone / "report.html")
    page.errors.clear()
    page.open((alone / "report.html").as_uri(), "document.body.getAttribute('data-charts-rendered') !== null")
    assert page.evaluate("document.body.getAttribute('data-charts-error')") == "plotly.js did not load"
    assert page.evaluate("document.body.getAttribute('data-charts-rendered')") == "0"
    notice = page.evaluate("document.getElementById('charts-missing').innerText")
    assert page.evaluate("document.getElementById('charts-missing').offsetHeight") > 0  # visible
    assert "plotly.js did not load" in notice
    assert page.evaluate("document.querySelectorAll('svg.main-svg').length") == 0
    assert any("plotly.js did not load" in error for error in page.errors), page.errors


def _real_tree_pages() -> list[Path]:
    tree = os.environ.get("CHAOS_BROWSER_TREE")
    return sorted(Path(tree).resolve().rglob("report.html")) if tree else []


@pytest.mark.skipif(
    not _real_tree_pages(), reason="set CHAOS_BROWSER_TREE to a real report tree (a gate's --out, reports/)"
)
def test_every_page_of_a_real_tree_draws_every_chart(page: Page) -> None:
    """Every page of a real run's tree (a gate run, a make chaos run) from file://: each chart it has is
    drawn by the tree's one plotly.js, with no console error, no two visible window labels of a chart touch,
    each anomaly's examples fit on one screen, and the page tells "What happened" — every count, partition
    and offset range it names (a passing run's worst figure too) the run's audit.json's
    (tests/story_check.py). Prints the tree's size, page count and highest examples section."""
    pages = _real_tree_pages()
    tree = Path(os.environ["CHAOS_BROWSER_TREE"]).resolve()
    undrawn: dict[str, object] = {}
    checked = 0
    tallest: tuple[float, str, str] = (0.0, "", "")
    for report in pages:
        page.errors.clear()
        page.open(report.as_uri(), "document.body.getAttribute('data-charts-rendered') !== null")
        drawn = page.evaluate(
            "Object.fromEntries([...document.querySelectorAll('.chart')]"
            ".map(el => [el.id, el.querySelectorAll('svg.main-svg').length]))"
        )
        rendered = page.evaluate("document.body.getAttribute('data-charts-rendered')")
        overlaps = page.evaluate(OVERLAPPING_LABELS)
        headings = page.evaluate("[...document.querySelectorAll(\"h3[id^='examples-']\")].map(h => h.id)")
        heights = {h: bottom - top for h in headings for top, bottom in [page.section(f"#{h}")]}
        tallest = max([tallest, *((h, report.parent.name, a) for a, h in heights.items())])
        story = page.evaluate("(document.querySelector('#story') || {}).innerText || ''")
        sentences = page.evaluate(
            "[...document.querySelectorAll('#story .what-happened .sentence')].map(e => e.innerText)"
        )
        if not drawn or not all(drawn.values()) or rendered != str(len(drawn)) or page.errors:
            undrawn[str(report.relative_to(tree))] = {"charts": drawn, "errors": list(page.errors)}
        if any(overlaps) or "What happened" not in story:
            undrawn[str(report.relative_to(tree))] = {"overlapping labels": overlaps, "story": story[:80]}
        if any(h > SCREEN_PX for h in heights.values()):  # the values folded below their group's context
            undrawn[str(report.relative_to(tree))] = {"examples higher than a screen (px)": heights}
        audit_json = report.with_name("audit.json")
        if audit_json.is_file():  # every count, partition and offset range the story names is the audit's
            checked += 1
            wrong = contradictions(sentences, AuditResult.from_dict(json.loads(audit_json.read_text())))
            if wrong:
                undrawn[str(report.relative_to(tree))] = {"story": sentences, "not the audit's": wrong}
    size_mb = sum(p.stat().st_size for p in tree.rglob("*") if p.is_file()) / 1e6
    drawn_pages = len(pages) - len(undrawn)
    print(
        f"\nbrowser: {len(pages)} pages of {tree} ({size_mb:.1f} MB), {drawn_pages} fully drawn; {checked} "
        f"stories read against their audit.json; the highest examples section {tallest[0]:.0f} px "
        f"({tallest[1]}, {tallest[2]}; a screen: {SCREEN_PX} px)"
    )
    assert undrawn == {}
