"""Reliability 8: bad input is one clear error, fast, naming the input and its fix — never a
traceback, never a 30-second timeout, never one error per test.

Each row runs a real process (the venv's ``pytest`` in a project of its own, or the ``chaos`` CLI) and
expects the CLI's exit 2 or pytest's usage error 4 (a scenario whose definition librdkafka refuses fails its
collection: pytest's 2), a message that names what was wrong and how to fix it, and no ``Traceback``. Every
row runs with ``DOCKER_HOST`` pointing at no engine: bad input must be refused before Docker is asked, so no
row can start a container (a regression that got past the check would fail on the missing engine instead,
with a message the row does not accept). Each row prints its line of figures; ``leftovers`` counts files a
refused command wrote anyway (``chaos audit`` of an empty directory must not leave an ``audit.json``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from chaos import versions
from chaos.history import ClientLog, Recorder
from chaos.run.manifest import ScenarioInfo, write_scenario
from tests.reliability.inner import CHAOS, NO_DOCKER, figures, remount_read_only, tmpfs

pytestmark = pytest.mark.reliability

USAGE_ERROR = 4  # pytest.ExitCode.USAGE_ERROR
COLLECTION_ERROR = 2  # pytest.ExitCode.INTERRUPTED: "Interrupted: 1 error during collection"
CLI_BAD_INPUT = 2
ROW_TIMEOUT_S = 30.0
DEFINITION_TIMEOUT_S = 10.0  # the bound for a misspelled client key

CHAOS_TEST = """
import pytest


@pytest.mark.chaos
def test_on_the_cluster(kafka_cluster):
    assert kafka_cluster.brokers
"""

TYPO_SCENARIO = """
from chaos.scenario import Scenario, ScenarioRun, Variant, chaos_scenario
from chaos.workload import IDEMPOTENT

SCENARIO = Scenario(
    scenario_id="client_key_typo",
    case_id="X8",
    title="a misspelled client key",
    source="tests/reliability/test_bad_input_matrix.py",
    symptom="none: librdkafka refuses the definition",
    client=IDEMPOTENT,
    guarantee="at_least_once",
    expected_verdict="pass",
    variants=(Variant("typo", "a misspelled key", {config}),),
)


@chaos_scenario(SCENARIO)
def test_typo(run: ScenarioRun) -> None:
    run.create_topic()
"""


@dataclass(frozen=True)
class Row:
    """One bad input: the command, where it runs, what it must answer."""

    command: list[str]
    cwd: Path
    expected: int
    mentions: tuple[str, ...]
    """Regexes (case-insensitive) the output must match, whitespace-normalised: the input and the fix."""
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = ROW_TIMEOUT_S
    untouched: Path | None = None
    """A directory the command must leave exactly as it was (no stray file written)."""


def _project(tmp: Path, files: dict[str, str]) -> Path:
    root = tmp / "project"
    (root / "tests").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n", encoding="utf-8")
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def _pytest(tmp: Path, *args: str, files: dict[str, str] | None = None) -> tuple[list[str], Path]:
    cwd = _project(tmp, files if files is not None else {"tests/test_chaos.py": CHAOS_TEST})
    return [sys.executable, "-m", "pytest", "-m", "chaos", *args], cwd


def _run_dir(tmp: Path) -> Path:
    """A run directory with a small history, as ``chaos audit`` expects."""
    run_dir = tmp / "run"
    with Recorder(run_dir, "r1") as recorder:
        recorder.record(
            ClientLog(
                run_id="r1", process="scenario", level="notice", message="bad input", facility="SCENARIO"
            )
        )
    write_scenario(run_dir, ScenarioInfo(scenario_id="bad_input"))
    return run_dir


def kafka_version(tmp: Path, mounts: ExitStack) -> Row:
    command, cwd = _pytest(tmp, "--kafka-version", "9.9.9")
    return Row(command, cwd, USAGE_ERROR, (r"--kafka-version 9\.9\.9", re.escape(versions.KAFKA_VERSION)))


def brokers(tmp: Path, mounts: ExitStack) -> Row:
    command, cwd = _pytest(tmp, "--chaos-brokers", "7")
    return Row(command, cwd, USAGE_ERROR, (r"--chaos-brokers 7", r"3\.\.5"))


def seed(tmp: Path, mounts: ExitStack) -> Row:
    command, cwd = _pytest(tmp)
    return Row(
        command, cwd, USAGE_ERROR, (r"CHAOS_SEED='abc'", r"whole number|integer"), {"CHAOS_SEED": "abc"}
    )


def images(tmp: Path, mounts: ExitStack) -> Row:
    command, cwd = _pytest(tmp)
    return Row(
        command,
        cwd,
        USAGE_ERROR,
        (r"CHAOS_IMAGES", r"bogus", r"official.*local.*auto"),
        {"CHAOS_IMAGES": "bogus"},
    )


def report_dir(tmp: Path, mounts: ExitStack) -> Row:
    command, cwd = _pytest(tmp, "--chaos-report-dir", "/proc/chaos-reliability/reports")
    return Row(command, cwd, USAGE_ERROR, (r"/proc/chaos-reliability/reports", r"writable"))


def producer_key(tmp: Path, mounts: ExitStack) -> Row:
    text = TYPO_SCENARIO.replace("{config}", 'producer_config={"acsk": "all"}')
    command, cwd = _pytest(tmp, files={"tests/test_typo.py": text})
    return Row(
        command, cwd, COLLECTION_ERROR, (r"\bacsk\b", r"did you mean 'acks'"), timeout_s=DEFINITION_TIMEOUT_S
    )


def consumer_key(tmp: Path, mounts: ExitStack) -> Row:
    text = TYPO_SCENARIO.replace("{config}", 'consumer_config={"auto.offset.rest": "earliest"}')
    command, cwd = _pytest(tmp, files={"tests/test_typo.py": text})
    return Row(
        command,
        cwd,
        COLLECTION_ERROR,
        (r"auto\.offset\.rest", r"did you mean 'auto\.offset\.reset'"),
        timeout_s=DEFINITION_TIMEOUT_S,
    )


def gate_key(tmp: Path, mounts: ExitStack) -> Row:
    gate = tmp / "gate.toml"
    gate.write_text('guarentee = "at_least_once"\n\n[producer]\n', encoding="utf-8")
    return Row(
        [CHAOS, "gate", str(gate)],
        tmp,
        CLI_BAD_INPUT,
        (r"gate\.toml:1: guarentee", r"did you mean 'guarantee'"),
    )


def gate_librdkafka_key(tmp: Path, mounts: ExitStack) -> Row:
    gate = tmp / "gate.toml"
    gate.write_text('guarantee = "at_least_once"\n\n[producer.settings]\nacsk = "all"\n', encoding="utf-8")
    return Row(
        [CHAOS, "gate", str(gate)], tmp, CLI_BAD_INPUT, (r"acsk \(.*gate\.toml:4\)", r"did you mean 'acks'")
    )


def audit_empty(tmp: Path, mounts: ExitStack) -> Row:
    empty = tmp / "empty"
    empty.mkdir()
    return Row(
        [CHAOS, "audit", str(empty)],
        tmp,
        CLI_BAD_INPUT,
        (re.escape(str(empty)), r"not a run directory", r"give the directory of one run"),
        untouched=empty,
    )


def audit_read_only(tmp: Path, mounts: ExitStack) -> Row:
    """A run directory on a read-only mount (root ignores file modes), else one without write permission."""
    run_dir = _run_dir(tmp / "rw")
    if os.geteuid() == 0:
        mount = tmp / "ro"
        mounts.enter_context(tmpfs(mount, "4m"))
        subprocess.run(["cp", "-a", str(run_dir), str(mount)], check=True, timeout=30)
        run_dir = mount / run_dir.name
        remount_read_only(mount)
    else:
        run_dir.chmod(0o555)
    return Row(
        [CHAOS, "audit", str(run_dir)],
        tmp,
        CLI_BAD_INPUT,
        (re.escape(str(run_dir)), r"not writable", r"make it writable|audit a copy"),
        untouched=run_dir,
    )


def audit_without_java(tmp: Path, mounts: ExitStack) -> Row:
    run_dir = _run_dir(tmp)
    java_home = tmp / "no-java"
    java_home.mkdir()
    return Row(
        [CHAOS, "audit", "--engine", "spark", str(run_dir)],
        tmp,
        CLI_BAD_INPUT,
        (re.escape(f"JAVA_HOME={java_home}"), r"install a JRE|--engine reference"),
        {"JAVA_HOME": str(java_home)},
    )


def run_unknown_scenario(tmp: Path, mounts: ExitStack) -> Row:
    return Row([CHAOS, "run", "NOPE9"], tmp, CLI_BAD_INPUT, (r"no scenario 'NOPE9'", r"chaos list"))


def run_unknown_variant(tmp: Path, mounts: ExitStack) -> Row:
    return Row(
        [CHAOS, "run", "PB1", "--variant", "nope"],
        tmp,
        CLI_BAD_INPUT,
        (r"no variant 'nope'", r"variants: .*crash"),
    )


ROWS: dict[str, Callable[[Path, ExitStack], Row]] = {
    "pytest --kafka-version 9.9.9": kafka_version,
    "pytest --chaos-brokers 7": brokers,
    "CHAOS_SEED=abc pytest": seed,
    "CHAOS_IMAGES=bogus pytest": images,
    "pytest --chaos-report-dir unwritable": report_dir,
    "scenario producer key typo": producer_key,
    "scenario consumer key typo": consumer_key,
    "chaos gate top-level key typo": gate_key,
    "chaos gate librdkafka key typo": gate_librdkafka_key,
    "chaos audit empty dir": audit_empty,
    "chaos audit read-only dir": audit_read_only,
    "chaos audit --engine spark without java": audit_without_java,
    "chaos run unknown scenario": run_unknown_scenario,
    "chaos run unknown variant": run_unknown_variant,
}


def _files(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): p.stat().st_size for p in directory.rglob("*")}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(ROWS))
def test_bad_input_is_one_clear_error(name: str, tmp_path: Path) -> None:
    with ExitStack() as mounts:  # a row's read-only mount, unmounted after the row
        check_row(name, ROWS[name](tmp_path, mounts))


def check_row(name: str, row: Row) -> None:
    before = _files(row.untouched) if row.untouched is not None else None
    env = {
        k: v for k, v in os.environ.items() if k not in {"PYTEST_ADDOPTS", "CHAOS_REPORT_DIR", "CHAOS_SEED"}
    }
    env.update({"DOCKER_HOST": NO_DOCKER, "COLUMNS": "300", **row.env})
    started = time.monotonic()
    done = subprocess.run(
        row.command,
        cwd=row.cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=row.timeout_s + 60,
        check=False,
    )
    seconds = time.monotonic() - started
    output = done.stdout + done.stderr
    flat = " ".join(output.split())
    stray = (
        [] if before is None or row.untouched is None else sorted(set(_files(row.untouched)) - set(before))
    )
    figures(f"bad_input {name}", 1, len(stray), seconds)
    shown = f"{' '.join(row.command)} (exit {done.returncode}, {seconds:.1f} s):\n{output}"
    assert done.returncode == row.expected, shown
    assert "Traceback" not in output, shown
    for pattern in row.mentions:
        assert re.search(pattern, flat, re.IGNORECASE), f"no /{pattern}/ in the message of {shown}"
    assert seconds < row.timeout_s, shown
    assert stray == [], f"{row.untouched} gained {stray} from a refused command: {shown}"
