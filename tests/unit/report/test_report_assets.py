"""What a report tree weighs: plotly.js once per tree (``<root>/assets/``) loaded by every page through a
relative path, pages well under 1 MB, broker logs saved gzip-compressed and still read, linked and
excerpted — from synthetic runs (no Kafka)."""

from __future__ import annotations

import gzip
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from chaos.cluster.logs import log_files, read_log_lines, write_log
from chaos.report import RunContext, render_run, render_tree, report_after_test
from chaos.report.assets import ensure_plotly, plotly_js, plotly_path
from tests.report_sample import write_sample_run

MAX_PAGE_BYTES = 1_000_000


class _Refs(HTMLParser):
    """Every ``<script src>`` and ``<a href>`` of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "script" and values.get("src"):
            self.scripts.append(str(values["src"]))
        if tag == "a" and values.get("href"):
            self.links.append(str(values["href"]))


def _refs(page: Path) -> _Refs:
    parser = _Refs()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def _target(page: Path, url: str) -> Path:
    """Where a relative URL of ``page`` points (what a browser opening it from file:// loads)."""
    assert not re.match(r"^[a-z]+:|^/", url), f"{url} is not relative"
    return Path(os.path.normpath(page.parent / unquote(url)))


def _plotly_copies(root: Path) -> list[Path]:
    return sorted(root.rglob("plotly-*.min.js"))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A report root as the pytest plugin fills it: two tests, each with a scenario run below its run_dir."""
    root = tmp_path / "reports"
    for name in ("test_a", "test_b"):
        run_dir = root / "tests" / name
        write_sample_run(run_dir / f"{name}-run")
        report_after_test(run_dir, root, RunContext(nodeid=f"scenarios/x.py::{name}", outcome="failed"))
    return root


def test_pages_of_a_tree_are_small_and_share_one_plotly_by_relative_path(tree: Path) -> None:
    pages = sorted(tree.rglob("report.html"))
    assert len(pages) == 2
    assert _plotly_copies(tree) == [plotly_path(tree)]
    assert plotly_path(tree).read_text(encoding="utf-8") == plotly_js()
    for page in pages:
        size = page.stat().st_size
        assert size < MAX_PAGE_BYTES, f"{page}: {size} bytes"
        refs = _refs(page)
        assert refs.scripts == [f"../../../{plotly_path(Path('.')).as_posix()}"]
        assert _target(page, refs.scripts[0]) == plotly_path(tree)
        assert plotly_js()[:200] not in page.read_text(encoding="utf-8")


def test_a_tree_copied_whole_still_finds_its_plotly(tree: Path, tmp_path: Path) -> None:
    copy = shutil.copytree(tree, tmp_path / "artifact" / "chaos-reports")
    shutil.rmtree(tree)
    for page in copy.rglob("report.html"):
        src = _refs(page).scripts[0]
        assert _target(page, src).read_text(encoding="utf-8") == plotly_js()


def test_rendering_again_keeps_the_copy_and_repairs_a_damaged_one(tree: Path) -> None:
    asset = plotly_path(tree)
    before = asset.stat()
    ensure_plotly(tree)
    after = asset.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not rewritten
    asset.write_text("truncated", encoding="utf-8")
    render_tree(tree)
    assert asset.read_text(encoding="utf-8") == plotly_js()
    assert _plotly_copies(tree) == [asset]
    assert not list(asset.parent.glob("*.tmp"))


def test_chaos_report_on_one_run_of_a_tree_uses_the_trees_copy(tree: Path) -> None:
    run = tree / "tests" / "test_a" / "test_a-run"
    rendered, index = render_tree(run)
    assert index is None
    assert _plotly_copies(tree) == [plotly_path(tree)]
    page = rendered[0].page
    assert _target(page, _refs(page).scripts[0]) == plotly_path(tree)


def test_a_lone_run_gets_its_copy_beside_the_page(tmp_path: Path) -> None:
    run = write_sample_run(tmp_path / "lone")
    page = render_run(run).page
    assert _refs(page).scripts == [plotly_path(Path(".")).as_posix()]
    assert _plotly_copies(tmp_path) == [plotly_path(run)]
    render_run(run)
    assert _plotly_copies(tmp_path) == [plotly_path(run)]


def test_the_page_says_when_plotly_did_not_load(tree: Path) -> None:
    html = next(tree.rglob("report.html")).read_text(encoding="utf-8")
    notice = re.search(r'<section class="missing" id="charts-missing" hidden>(.*?)</section>', html, re.S)
    assert notice is not None
    assert "plotly.js did not load" in notice.group(1)
    assert 'typeof Plotly === "undefined"' in html
    assert 'getElementById("charts-missing")' in html


# ---- broker logs ---------------------------------------------------------------------------------------


def test_page_links_the_compressed_broker_logs(tree: Path) -> None:
    page = tree / "tests" / "test_a" / "test_a-run" / "report.html"
    links = [link for link in _refs(page).links if ".log" in link]
    assert links == [f"logs/broker-{b}.log.gz" for b in (1, 2, 3)]
    for link in links:
        target = _target(page, link)
        assert next(read_log_lines(target)).endswith("heartbeat ok (kafka.server.BrokerLifecycleManager)")


def test_plain_logs_of_older_runs_render_the_same_symptoms_and_excerpts(tmp_path: Path) -> None:
    gz = write_sample_run(tmp_path / "gz")
    plain = write_sample_run(tmp_path / "plain")
    for path in log_files(plain / "logs"):
        (path.parent / path.name.removesuffix(".gz")).write_bytes(gzip.decompress(path.read_bytes()))
        path.unlink()
    assert [p.name for p in log_files(plain / "logs")] == ["broker-1.log", "broker-2.log", "broker-3.log"]

    def logs_section(run: Path) -> str:
        html = render_run(run).page.read_text(encoding="utf-8")
        return html[html.index('id="symptoms"') : html.index('id="reproduce"')].replace(".log.gz", ".log")

    section = logs_section(plain)
    assert "broker-1.log:" in section  # the broker_log symptom's matching line
    assert "Shrinking ISR from 1,2,3 to 1,3" in section
    assert "broker-3.log  [2026-01-15 12:00:24,250] INFO [BrokerServer id=3]" in section  # an excerpt
    assert section == logs_section(gz)


def test_write_log_compresses_and_replaces_a_plain_copy(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "broker-1.log").write_text("old\n", encoding="utf-8")
    (logs / "toxiproxy.log").write_text("proxy\n", encoding="utf-8")
    (logs / "notes.txt").write_text("not a log\n", encoding="utf-8")
    text = "".join(f"2026-01-15T12:00:{i % 60:02d}.000000000Z [x] INFO line {i}\n" for i in range(5000))
    path = write_log(logs, "broker-1", text.encode("utf-8"))
    assert path == logs / "broker-1.log.gz"
    assert not (logs / "broker-1.log").exists()
    assert path.stat().st_size < len(text) / 5
    assert write_log(logs, "broker-1", text.encode("utf-8")).read_bytes() == path.read_bytes()
    assert log_files(logs) == [path, logs / "toxiproxy.log"]
    assert list(read_log_lines(path)) == text.splitlines()


def test_a_cut_off_or_foreign_gz_yields_what_it_can(tmp_path: Path) -> None:
    text = "".join(f"line {i} {'x' * 40}\n" for i in range(20000))
    path = write_log(tmp_path, "broker-1", text.encode("utf-8"))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    lines = list(read_log_lines(path))
    assert 0 < len(lines) < 20000
    assert lines[:-1] == text.splitlines()[: len(lines) - 1]  # the last one may be cut mid-line
    path.write_bytes(b"not gzip at all\n")
    assert list(read_log_lines(path)) == []
