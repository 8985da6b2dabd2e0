"""``chaos matrix``: report trees side by side, a row per case variant, verdicts and figures per column."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from chaos.audit.auditfile import read_audit
from chaos.cli import cli
from chaos.errors import ConfigError
from chaos.report.matrix import matrix_markdown, parse_columns
from chaos.report.render import load_summary
from tests.report_sample import write_sample_run


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Column ``a``: the sample run as recorded (it lost acknowledged records); column ``b``: the same
    case audited clean, plus nothing else."""
    a, b = tmp_path_factory.mktemp("a"), tmp_path_factory.mktemp("b")
    write_sample_run(a / "tests" / "t" / "run-1", seconds=10, rate=10)
    write_sample_run(b / "tests" / "t" / "run-1", seconds=10, rate=10, clean_audit=True)
    return a, b


def test_a_row_per_variant_with_each_columns_verdict_and_figures(trees: tuple[Path, Path]) -> None:
    a, b = trees
    lost = read_audit(a / "tests" / "t" / "run-1")
    assert lost is not None
    n = lost.facts.anomaly("lost_acked").count
    assert n > 0
    summary = load_summary(a / "tests" / "t" / "run-1")
    table = matrix_markdown([("kafka-3.9", a), ("kafka-4.4", b)]).splitlines()
    assert table[0] == "| case | scenario | kafka-3.9 | kafka-4.4 |"
    (row,) = table[2:]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == f"{summary.case_id} ≠"  # the verdicts differ between the columns
    assert cells[1] == summary.scenario_id
    assert cells[2].startswith(f"{summary.verdict} · lost {n}")
    assert cells[3].startswith("pass · lost 0")


def test_a_variant_a_column_did_not_run_is_a_dash(trees: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = trees
    (tmp_path / "empty").mkdir()
    rows = matrix_markdown([("a", a), ("none", tmp_path / "empty")]).splitlines()[2:]
    assert len(rows) == 1
    assert rows[0].endswith("| — |")
    assert " ≠ " not in rows[0]


def test_columns_are_label_equals_an_existing_directory(tmp_path: Path) -> None:
    assert parse_columns([f"x={tmp_path}"]) == [("x", tmp_path)]
    with pytest.raises(ConfigError, match="expected LABEL=REPORT_DIR"):
        parse_columns([str(tmp_path)])
    with pytest.raises(ConfigError, match="is not a directory"):
        parse_columns([f"x={tmp_path / 'nope'}"])


def test_the_cli_prints_the_table_and_refuses_bad_columns(trees: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = trees
    done = CliRunner().invoke(cli, ["matrix", f"one={a}", f"two={b}"])
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[0] == "| case | scenario | one | two |"
    assert len(done.output.splitlines()) == 3
    bad = CliRunner().invoke(cli, ["matrix", "nolabel"])
    assert isinstance(bad.exception, ConfigError)  # `chaos` turns it into exit 2 with the message
