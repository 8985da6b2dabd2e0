"""The harness as a user gets it: the wheel, installed (not editable) in a fresh venv, used from a project
that is not this repo.

The module's fixture builds the wheel from a copy of the sources, creates a venv and installs the wheel
with requirements.lock as ``make setup`` does (uv, and the wheelhouse holding pyspark's wheel: ≈ 20 s warm
on the project's machine, where pip took ≈ 1 min; the time is printed). The tests then run the venv's own
`chaos` and `pytest` in a temporary project holding only ``tests/test_mine.py`` — the smallest scenario of
docs/writing-scenarios.md, read from the doc — and check that reports land in that project and nothing
lands in site-packages. Only the last test starts a cluster
(the images are the ones already built: CHAOS_IMAGES and the cache variables pass through).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

from chaos.paths import cache_dir
from tests.writing_doc import smallest_scenario

pytestmark = [pytest.mark.integration, pytest.mark.own_cluster]

REPO: Final = Path(__file__).resolve().parents[2]
SOURCES: Final = ("pyproject.toml", "README.md", "chaos", "scenarios")
CATALOG_CASES: Final = 15
# Variables that would make the venv's tools see this checkout, or another report dir, instead of theirs.
_HIDDEN: Final = frozenset(
    {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "CHAOS_REPORT_DIR", "PYTEST_ADDOPTS", "PYTEST_PLUGINS"}
)


@dataclass(frozen=True)
class Installed:
    """A fresh venv with the wheel (not editable) and the pinned requirements."""

    venv: Path
    site_packages: Path

    def tool(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def env(self) -> dict[str, str]:
        """This process's environment (Docker, CHAOS_IMAGES, caches) for the venv's tools."""
        env = {k: v for k, v in os.environ.items() if k not in _HIDDEN}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["COLUMNS"] = "200"
        return env

    def run(self, args: list[str], cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, cwd=cwd, env=self.env(), capture_output=True, text=True, timeout=timeout_s, check=False
        )

    def files(self) -> dict[str, tuple[int, int]]:
        """Every file under site-packages: relative path -> (size, mtime ns)."""
        found = {}
        for path in self.site_packages.rglob("*"):
            if path.is_file():
                stat = path.stat()
                found[path.relative_to(self.site_packages).as_posix()] = (stat.st_size, stat.st_mtime_ns)
        return found


def _check(args: list[str], timeout_s: float) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, check=False)
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return str(done.stdout)


@pytest.fixture(scope="module")
def installed() -> Iterator[Installed]:
    root = Path(tempfile.mkdtemp(prefix="chaos-out-of-repo-"))
    try:
        started = time.monotonic()
        source = root / "src"
        source.mkdir()
        for name in SOURCES:
            if (REPO / name).is_dir():
                shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(REPO / name, source / name)
        _check([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(root), str(source)], 300)
        (wheel,) = root.glob("chaos_harness-*.whl")
        built = time.monotonic()
        venv = root / "venv"
        _check([sys.executable, "-m", "venv", str(venv)], 120)
        python = str(venv / "bin" / "python")
        lock = str(REPO / "requirements.lock")
        uv = Path(sys.executable).with_name("uv")  # scripts/setup.sh installs it beside this venv's python
        assert uv.is_file(), f"{uv} is missing: run `make setup`"
        wheels = str(cache_dir() / "wheels")  # scripts/setup.sh's wheelhouse (pyspark, built once)
        _check([str(uv), "pip", "install", "-q", "--python", python, "--compile-bytecode", "--find-links",
                wheels, "-r", lock, str(wheel)], 900)  # fmt: skip
        site = _check([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], 60)
        print(
            f"\nwheel built in {built - started:.1f} s; venv with the wheel and requirements.lock in "
            f"{time.monotonic() - built:.1f} s"
        )
        yield Installed(venv, Path(site.strip()))
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's project: only ``tests/test_mine.py``, the doc's smallest scenario."""
    root = tmp_path / "project"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_mine.py").write_text(smallest_scenario())
    return root


def _written(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """Files created or changed in site-packages, except pytest's assertion-rewrite bytecode cache
    (``__pycache__/*-pytest-*.pyc``), which pytest writes next to the modules it rewrites: test files
    and the modules of every plugin installed through an entry point (``PYTHONDONTWRITEBYTECODE=1``
    turns it off)."""
    changed = [path for path, stat in after.items() if before.get(path) != stat]
    return sorted(p for p in changed if not re.search(r"(^|/)__pycache__/[^/]+-pytest-[^/]+\.pyc$", p))


def test_chaos_list_and_run_use_the_catalog_shipped_in_the_wheel(
    installed: Installed, tmp_path: Path
) -> None:
    catalog = (installed.site_packages / "chaos" / "catalog").resolve()
    assert len(list(catalog.glob("test_*.py"))) >= CATALOG_CASES
    before = installed.files()

    listed = installed.run([installed.tool("chaos"), "list"], tmp_path, 120)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    cases = re.findall(r"^│ ([A-Z]{1,4}[0-9]{1,2}) +│", listed.stdout, re.MULTILINE)
    assert len(cases) >= CATALOG_CASES, listed.stdout
    assert "PB1" in cases
    assert f"from {catalog}" in listed.stdout

    # `chaos run PB1`'s pytest command line, collected only (no cluster): the node is the installed file.
    collect = (
        "import json, sys, pytest\n"
        "from chaos.scenario import find, pytest_args\n"
        "args = pytest_args(find('PB1'), variant='crash', extra=('--collect-only', '-q'))\n"
        "print('ARGS', json.dumps(args))\n"
        "sys.exit(int(pytest.main(args)))\n"
    )
    done = installed.run([installed.tool("python"), "-c", collect], tmp_path, 120)
    assert done.returncode == 0, done.stdout + done.stderr
    (shown,) = re.findall(r"^ARGS (.*)$", done.stdout, re.MULTILINE)
    args = json.loads(shown)
    assert args[0] == f"{catalog}/test_pb1_partitioned_broker.py::test_pb1[crash]"
    assert args[args.index("--rootdir") + 1] == str(catalog.parent)
    assert args[args.index("--chaos-report-dir") + 1] == str(tmp_path / "reports")
    assert "catalog/test_pb1_partitioned_broker.py::test_pb1[crash]" in done.stdout.splitlines()
    assert "1 test collected" in done.stdout
    assert _written(before, installed.files()) == []


def test_the_docs_scenario_collects_in_a_project_of_its_own(installed: Installed, project: Path) -> None:
    done = installed.run([installed.tool("pytest"), "-m", "chaos", "--collect-only", "-q"], project, 120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tests/test_mine.py::test_leader_crash[crash]" in done.stdout
    assert "1 test collected" in done.stdout


def test_the_docs_scenario_passes_in_a_project_of_its_own(installed: Installed, project: Path) -> None:
    before = installed.files()
    # The inner session starts its own cluster (as test_faults_cleanup's does); below pytest's 900 s timeout.
    done = installed.run([installed.tool("pytest"), "-m", "chaos", "-ra"], project, 780)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    summary = done.stdout.strip().splitlines()[-1]
    assert re.search(r"\b1 passed\b", summary), output
    assert not re.search(r"failed|error", summary), output

    (scenario,) = (project / "reports").rglob("scenario.json")
    run_dir = scenario.parent
    assert run_dir.is_relative_to(project / "reports" / "tests"), run_dir
    for name in ("audit.json", "report.html"):
        assert (run_dir / name).is_file(), f"{name} missing in {run_dir}: {sorted(os.listdir(run_dir))}"
    assert _written(before, installed.files()) == []
