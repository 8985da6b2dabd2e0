"""`chaos audit URI`: a run read through Spark's Hadoop file systems audits as its local directory does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from chaos.audit.run import is_uri
from chaos.cli import cli
from tests.report_sample import write_sample_run

SPARK = ("--engine", "spark", "--spark-master", "local[2]")


@pytest.mark.parametrize(
    ("run_dir", "uri"),
    [
        ("file:///srv/runs/r1", True),
        ("s3a://bucket/runs/r1", True),
        ("hdfs://nn:8020/r", True),
        ("/srv/runs/r1", False),
        ("runs/file:r1", False),
        ("C:\\runs", False),
    ],
)
def test_uris_are_told_from_paths(run_dir: str, uri: bool) -> None:
    assert is_uri(run_dir) is uri


def test_a_run_read_by_file_uri_audits_as_its_local_directory(tmp_path: Path, audit_spark: Any) -> None:
    run_dir = write_sample_run(tmp_path / "run", seconds=4, rate=3)
    (run_dir / "audit.json").unlink(missing_ok=True)
    assert (run_dir / "history" / "events.parquet").is_file()
    by_path, by_uri = tmp_path / "by-path.json", tmp_path / "by-uri.json"
    local = CliRunner().invoke(cli, ["audit", str(run_dir), *SPARK, "--out", str(by_path)])
    remote = CliRunner().invoke(cli, ["audit", run_dir.as_uri() + "/", *SPARK, "--out", str(by_uri)])
    assert local.exit_code == remote.exit_code, (local.output, remote.output)
    assert str(by_uri) in remote.output
    path_audit, uri_audit = json.loads(by_path.read_text()), json.loads(by_uri.read_text())
    assert uri_audit == path_audit
    assert uri_audit["engine"] == "spark"
    assert uri_audit["facts"]["totals"]["sends"] == 12
    assert not (run_dir / "audit.json").exists()  # --out, not the run directory

    from chaos.gate.job import main  # spark-submit's entry point takes the URI the same way

    by_job = tmp_path / "by-job.json"
    assert main([run_dir.as_uri(), "--master", "local[2]", "--out", str(by_job)]) == local.exit_code
    assert json.loads(by_job.read_text()) == path_audit
    assert main([run_dir.as_uri(), "--master", "local[2]"]) == 2  # no --out


def test_a_uri_without_a_history_is_unknown_and_says_what_it_needs(tmp_path: Path, audit_spark: Any) -> None:
    out = tmp_path / "audit.json"
    missing = (tmp_path / "no-such-run").as_uri()
    result = CliRunner().invoke(cli, ["audit", missing, *SPARK, "--out", str(out)])
    assert result.exit_code == 3, result.output
    audit = json.loads(out.read_text())
    assert audit["verdict"] == "unknown"
    (problem,) = audit["facts"]["problems"]
    assert f"cannot read {missing}/history/events.parquet" in problem
    assert "compacted to Parquet" in problem


def test_a_uri_needs_spark_and_out_and_a_path_must_be_a_directory(tmp_path: Path) -> None:
    uri = (tmp_path / "run").as_uri()
    for args, says in (
        (["--engine", "reference", "--out", "x.json"], "only the Spark engine reads"),
        (list(SPARK), "--out FILE"),
    ):
        result = CliRunner().invoke(cli, ["audit", uri, *args])
        assert result.exit_code == 2, result.output
        assert says in result.output
    result = CliRunner().invoke(cli, ["audit", str(tmp_path / "nowhere"), "--engine", "reference"])
    assert result.exit_code == 2, result.output
    assert "is not a directory" in result.output
    assert list(tmp_path.iterdir()) == []
