"""``chaos gate --check-only`` run as a team's CI runs it: the real command in a subprocess, on the
examples; and docs/gate.md kept in step with the code (every rule, every key)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

import pytest

from chaos.gate.gatefile import THRESHOLD_KEYS, TOP_KEYS, TOPIC_KEYS, TRAFFIC_KEYS
from chaos.gate.lint import RULES, rules_markdown
from chaos.gate.servicetable import SERVICE_KEYS

ROOT: Final = Path(__file__).resolve().parents[3]
EXAMPLES: Final = ROOT / "examples"
DOC: Final = ROOT / "docs" / "gate.md"
LIMIT_S: Final = 10.0


def chaos_gate(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, float]:
    """Run ``chaos gate ARGS`` (the console script's ``main``) in a subprocess: exit code, output, seconds."""
    env = {**os.environ, "COLUMNS": "200", **(env or {})}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", "from chaos.cli import main; main()", "gate", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
        env=env,
    )
    elapsed = time.monotonic() - started
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output, output
    return proc.returncode, output, elapsed


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    """A copy of examples/ (so the test can see that nothing is written)."""
    target = tmp_path / "examples"
    shutil.copytree(EXAMPLES, target)
    return target


def _listing(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


def test_the_weak_example_is_not_kept_naming_the_keys_and_cases(examples: Path) -> None:
    before = _listing(examples.parent)
    code, output, elapsed = chaos_gate("examples/gate-weak.toml", "--check-only", cwd=examples.parent)
    assert code == 1, output
    assert elapsed < LIMIT_S, f"took {elapsed:.1f} s"
    assert "NOT KEPT: at_least_once" in output
    assert "acks=1  (examples/producer-weak.properties:11)" in output
    assert "unclean.leader.election.enable=true  (examples/gate-weak.toml:20)" in output
    assert "enable.auto.commit=true  (librdkafka default)" in output
    for rule in ("acks_1", "unclean_election", "commit_before_processing", "retries_reorder"):
        assert f"x {rule}:" in output
    assert "cases: DF1, ISR2, L2, L4, L6, O1" in output
    assert _listing(examples.parent) == before, "--check-only wrote files"


def test_the_strong_example_is_kept(examples: Path) -> None:
    code, output, elapsed = chaos_gate("examples/gate-strong.toml", "--check-only", cwd=examples.parent)
    assert code == 0, output
    assert elapsed < LIMIT_S
    assert "KEPT: idempotent. The strongest guarantee these settings keep: idempotent" in output
    assert "NOT KEPT" not in output


def test_a_misspelled_key_exits_2_naming_it_and_its_line(examples: Path) -> None:
    (examples / "producer-weak.properties").write_text("linger.ms=5\nacsk=all\n", encoding="utf-8")
    code, output, elapsed = chaos_gate("examples/gate-weak.toml", "--check-only", cwd=examples.parent)
    assert code == 2, output
    assert elapsed < LIMIT_S
    assert 'acsk (examples/producer-weak.properties:2): No such configuration property: "acsk"' in output
    assert "did you mean 'acks'?" in output


def test_a_misspelled_gate_key_exits_2(tmp_path: Path) -> None:
    (tmp_path / "g.toml").write_text(
        'guarantee = "idempotent"\n[producer.setting]\nacks = 1\n', encoding="utf-8"
    )
    code, output, _ = chaos_gate("g.toml", "--check-only", cwd=tmp_path)
    assert code == 2, output
    assert "g.toml:2: producer.setting: unknown key; did you mean 'settings'?" in output


def test_an_unreadable_gate_file_exits_2(tmp_path: Path) -> None:
    code, output, _ = chaos_gate("missing.toml", "--check-only", cwd=tmp_path)
    assert code == 2
    assert "missing.toml does not exist" in output


def test_the_full_run_lints_first_and_bad_input_exits_2_before_anything_starts(examples: Path) -> None:
    (examples / "producer-weak.properties").write_text("acsk=all\n", encoding="utf-8")
    before = _listing(examples.parent)
    code, output, elapsed = chaos_gate(
        "examples/gate-weak.toml", "--out", "out", "--junit", "j.xml", cwd=examples.parent
    )
    assert code == 2, output
    assert elapsed < LIMIT_S
    assert "the gate cannot run (exit 2; nothing was judged, this is not a verdict)" in output
    assert "did you mean 'acks'?" in output
    assert _listing(examples.parent) == before


def test_the_full_run_without_a_docker_engine_exits_2_with_the_fix(examples: Path) -> None:
    """No engine answers (DOCKER_HOST names no socket): exit 2 and the fix, before pytest starts, after
    the lint (which still reports the claim); nothing written."""
    before = _listing(examples.parent)
    code, output, elapsed = chaos_gate(
        "examples/gate-weak.toml",
        "--out",
        "out",
        cwd=examples.parent,
        env={"DOCKER_HOST": f"unix://{examples.parent / 'no-docker.sock'}"},
    )
    assert code == 2, output
    assert elapsed < 20
    assert "NOT KEPT: at_least_once" in output  # the lint ran first
    assert (
        "Cases the full gate runs (the default set that applies, and added by the lint: L6, O1, DF1, RN1; "
        "time profile ci): PB1, ISR2, MPI1, L2, L6, D1, O1, DF1, RN1"
    ) in output
    assert "no Docker engine answers" in output
    assert "this is not a verdict" in output
    assert _listing(examples.parent) == before


def test_out_and_junit_with_check_only_write_nothing(examples: Path) -> None:
    before = _listing(examples.parent)
    code, output, _ = chaos_gate(
        "examples/gate-strong.toml", "--check-only", "--out", "out", "--junit", "j.xml", cwd=examples.parent
    )
    assert code == 0, output
    assert "--check-only wrote nothing" in output
    assert _listing(examples.parent) == before


def test_the_docs_rules_table_is_generated_from_the_code() -> None:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("<!-- rules:start -->\n", 1)[1].split("<!-- rules:end -->", 1)[0]
    assert block == rules_markdown(), (
        "docs/gate.md's rules table is stale: replace the text between its markers with the output of "
        '`python -c "from chaos.gate.lint import rules_markdown; print(rules_markdown())"`'
    )
    for rule in RULES:
        assert f"| `{rule.id}` |" in block


def test_the_docs_describe_every_key() -> None:
    text = DOC.read_text(encoding="utf-8")
    tables = ("producer", "consumer", "topic", "traffic", "thresholds", "baseline", "service")
    for table in tables:
        assert f"`[{table}]`" in text, f"docs/gate.md does not describe [{table}]"
    keys = (*TOP_KEYS, *TOPIC_KEYS, *TRAFFIC_KEYS, *THRESHOLD_KEYS, "file", "settings", "commit", "transform")
    keys += tuple(
        k for k in SERVICE_KEYS if k not in ("name", "ready_pattern", "ready_timeout_s", "stop_grace_s")
    )
    for key in (*keys, "tolerance", "min_change_s"):
        assert key in tables or f"| `{key}`" in text, f"docs/gate.md's tables do not describe {key}"


def test_the_full_run_is_pytest_over_the_catalog_with_the_gate_and_exits_with_gate_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``chaos gate`` without --check-only: the arguments it hands pytest, and its exit code taken from the
    gate.json that run wrote (2 when it wrote none)."""
    import chaos.cluster.engine
    from chaos.gate.driver.command import GateOptions, run_gate
    from chaos.gate.report import Attempt, CaseResult, GateReport, write_gate
    from chaos.scenario import scenarios_dir

    calls: list[list[str]] = []
    written: dict[str, bool] = {"gate": True}

    def fake_main(args: list[str]) -> int:
        calls.append(args)
        out = Path(args[args.index("--chaos-report-dir") + 1])
        if written["gate"]:
            unknown = CaseResult("PB1", "pb1", "n", "remediated", (Attempt("r", "unknown"),))
            write_gate(out, GateReport("g.toml", "idempotent", "ci", (unknown,), started_ts=time.time()))
        return 1

    monkeypatch.setattr(chaos.cluster.engine, "docker_client", lambda: None)
    monkeypatch.setattr(pytest, "main", fake_main)
    gate = str(EXAMPLES / "gate-strong.toml")
    code = run_gate(GateOptions(gate, str(tmp_path / "out"), "j.xml", calibrate=True, seed=7))
    assert code == 3
    (args,) = calls
    assert args[:3] == [str(scenarios_dir()), "-m", "chaos"]
    for option, value in (
        ("--chaos-gate", gate),
        ("--chaos-report-dir", str(tmp_path / "out")),
        ("--chaos-gate-junit", str(Path("j.xml").absolute())),
        ("--chaos-seed", "7"),
    ):
        assert args[args.index(option) + 1] == value
    assert "--chaos-calibrate" in args
    assert "--chaos-gate-allow-flaky" not in args
    written["gate"] = False
    assert run_gate(GateOptions(gate, str(tmp_path / "other"), allow_flaky=True)) == 2
