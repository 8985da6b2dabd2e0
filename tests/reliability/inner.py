"""What the reliability tests share: inner sessions run as real processes, and what they leave behind.

An inner session is ``pytest`` (or the ``chaos`` command) in a project of its own under the test's
``tmp_path``, started in its own process group so a test can signal it as a terminal or a CI runner would
(SIGINT to the group, SIGTERM or SIGKILL to the runner). Each session carries a tag in its environment
(:data:`TAG_ENV`), inherited by every process it starts (member children, Spark's JVM), and loads a probe
plugin that appends each cluster's run id to a file *before* the cluster starts. What a session left behind
is then exactly: the containers and networks labelled with its run ids, and the live processes carrying its
tag — even while other sessions (a second test session, a benchmark) run on the same machine.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Final, TypeVar

import pytest

from chaos.cluster.engine import LABEL, docker_client, labelled_containers
from chaos.cluster.sweep import sweep
from chaos.errors import ChaosError
from chaos.history import FaultEvent, read_events
from chaos.report.render import find_runs
from chaos.run.manifest import read_scenario

REPO: Final = Path(__file__).resolve().parents[2]
CHAOS: Final = str(Path(sys.executable).parent / "chaos")
TAG_ENV: Final = "CHAOS_RELIABILITY_TAG"
RUN_IDS_ENV: Final = "CHAOS_RELIABILITY_RUN_IDS"
PROBE: Final = "chaos_reliability_probe"
MEMBER_CHILD: Final = "chaos.workload.member_child"
SPARK_JVM: Final = "org.apache.spark"
NO_DOCKER: Final = "unix:///nonexistent/chaos-reliability-no-docker.sock"
"""A ``DOCKER_HOST`` no engine answers on: a row run with it provably starts no container."""
REAP_S: Final = 45.0
"""How long a reaper may take to remove a dead run: RYUK_RECONNECTION_TIMEOUT (10 s), then the removal."""
PROCESS_GRACE_S: Final = 20.0
"""How long a child may take to die once its session has exited (a JVM notices EOF on its stdin)."""

# Variables that would point an inner session at this checkout's settings or report dir instead of its own.
_HIDDEN: Final = frozenset(
    {"PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_CURRENT_TEST", "CHAOS_REPORT_DIR", "CHAOS_SEED"}
)
_PYTEST_INI: Final = "[pytest]\naddopts = -p no:cacheprovider -ra\n"
_PROBE_SOURCE: Final = f'''"""Loaded by the reliability tests' inner sessions (-p {PROBE}): appends each
cluster's run id to ${RUN_IDS_ENV} before the cluster starts, so the outer test knows what to look for
after a kill."""

import os

from chaos.cluster.cluster import KafkaCluster

_start = KafkaCluster.start


def _recording_start(self):
    with open(os.environ["{RUN_IDS_ENV}"], "a", encoding="utf-8") as ids:
        ids.write(self.run_id + "\\n")
        ids.flush()
        os.fsync(ids.fileno())
    return _start(self)


KafkaCluster.start = _recording_start
'''

T = TypeVar("T")


def _default_sigint() -> None:
    """SIGINT as a terminal's foreground job gets it. A job started in the background of a
    non-interactive shell (``cmd &``, CI wrappers, nohup) inherits SIGINT *ignored*, and Python then
    installs no KeyboardInterrupt handler: Ctrl-C would be tested on a process that cannot receive it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Session:
    """One inner process in a process group of its own, its output (stdout and stderr) in a file."""

    def __init__(
        self, name: str, command: list[str], cwd: Path, env: Mapping[str, str], scratch: Path
    ) -> None:
        self.name = name
        self.command = command
        self.tag = f"{name}-{secrets.token_hex(6)}"
        self.run_ids_path = scratch / f"{name}.run-ids"
        self.log_path = scratch / f"{name}.log"
        scratch.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                command,
                cwd=cwd,
                env={**env, TAG_ENV: self.tag, RUN_IDS_ENV: str(self.run_ids_path)},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_default_sigint,
            )
        self.started = time.monotonic()

    @property
    def running(self) -> bool:
        return self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def run_ids(self) -> list[str]:
        """The run ids of the clusters this session started (or began to start)."""
        try:
            return self.run_ids_path.read_text(encoding="utf-8").split()
        except FileNotFoundError:
            return []

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def tail(self, lines: int = 80) -> str:
        return f"--- {self.name}: {' '.join(self.command)}\n" + "\n".join(self.output().splitlines()[-lines:])

    def send(self, sig: signal.Signals, *, group: bool) -> None:
        """``sig`` to the whole process group (a terminal's Ctrl-C) or to the runner alone."""
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(self.proc.pid, sig)
            else:
                self.proc.send_signal(sig)

    def wait(self, timeout_s: float) -> int | None:
        """The exit status once the runner has exited, ``None`` if it still runs after ``timeout_s``."""
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL the process group (whatever of it is still alive) and reap the runner."""
        self.send(signal.SIGKILL, group=True)
        self.wait(30)


class InnerProject:
    """A pytest project of its own under ``root`` (``pytest.ini`` and ``files``), and its sessions."""

    def __init__(self, root: Path, files: Mapping[str, str]) -> None:
        self.root = root
        self.path = root / "project"
        self.report_dir = self.path / "reports"
        self.scratch = root / "scratch"
        self.sessions: list[Session] = []
        probe = root / "probe"
        for directory in (self.path, probe, self.scratch):
            directory.mkdir(parents=True, exist_ok=True)
        (self.path / "pytest.ini").write_text(_PYTEST_INI, encoding="utf-8")
        for name, text in files.items():
            (self.path / name).parent.mkdir(parents=True, exist_ok=True)
            (self.path / name).write_text(text, encoding="utf-8")
        (probe / f"{PROBE}.py").write_text(_PROBE_SOURCE, encoding="utf-8")
        self._probe_dir = probe

    def env(self, report_dir: Path | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """This process's environment (Docker, image and cache variables) for an inner session, with the
        probe loaded and its own report dir."""
        env = {k: v for k, v in os.environ.items() if k not in _HIDDEN}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self._probe_dir), env.get("PYTHONPATH")]))
        env["PYTEST_ADDOPTS"] = f"-p {PROBE}"
        env["CHAOS_REPORT_DIR"] = str(report_dir or self.report_dir)
        env["COLUMNS"] = "200"
        env.update(extra or {})
        return env

    def pytest(
        self, name: str, *args: str, report_dir: Path | None = None, env: Mapping[str, str] | None = None
    ) -> Session:
        """``python -m pytest ARGS`` in the project."""
        return self.start(name, [sys.executable, "-m", "pytest", *args], report_dir=report_dir, env=env)

    def chaos(
        self, name: str, *args: str, report_dir: Path | None = None, env: Mapping[str, str] | None = None
    ) -> Session:
        """``chaos ARGS`` (the CLI) from the project's directory."""
        return self.start(name, [CHAOS, *args], report_dir=report_dir, env=env)

    def start(
        self,
        name: str,
        command: list[str],
        *,
        report_dir: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Session:
        if any(s.name == name for s in self.sessions):
            raise ValueError(f"a session named {name} was already started in {self.path}")
        session = Session(name, command, self.path, self.env(report_dir, env), self.scratch)
        self.sessions.append(session)
        return session

    def close(self) -> None:
        """Kill every session's processes and remove its clusters' resources (whatever a failed test left)."""
        for session in self.sessions:
            clean_up(session)


MakeProject = Callable[[str, Mapping[str, str]], InnerProject]
"""The ``inner`` fixture: ``inner(name, {relative path: text})`` -> a new :class:`InnerProject`."""


def wait_for(
    what: str,
    check: Callable[[], T | None],
    timeout_s: float,
    session: Session | None = None,
    interval_s: float = 0.2,
) -> T:
    """Poll ``check`` until it returns a truthy value (returned); fail after ``timeout_s``, or as soon as
    ``session`` exits (with its output)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if session is not None and not session.running:
            raise AssertionError(
                f"{session.name} exited ({session.returncode}) before {what}\n{session.tail()}"
            )
        if time.monotonic() > deadline:
            tail = f"\n{session.tail()}" if session is not None else ""
            raise AssertionError(f"not within {timeout_s:.0f} s: {what}{tail}")
        time.sleep(interval_s)


# ---- what a session left behind -------------------------------------------------------------------------


def tagged_processes(tag: str) -> list[tuple[int, str]]:
    """Live processes whose environment holds ``TAG_ENV=tag``: (pid, command line)."""
    needle = f"{TAG_ENV}={tag}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
            cmdline = Path(entry.path, "cmdline").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if needle in environ.split(b"\0"):  # a zombie's environ reads empty: only live processes count
            found.append((int(entry.name), cmdline.replace(b"\0", b" ").decode(errors="replace").strip()))
    return found


def describe_process(pid: int, command: str) -> str:
    kind = "member child" if MEMBER_CHILD in command else "Spark JVM" if SPARK_JVM in command else "process"
    return f"{kind} {pid}: {command[:160]}"


def docker_leftovers(run_ids: list[str]) -> list[str]:
    """The containers and networks still labelled with one of ``run_ids``."""
    client = docker_client()
    found = []
    for run_id in run_ids:
        selector = {"label": f"{LABEL}={run_id}"}
        containers = labelled_containers(f"{LABEL}={run_id}", client=client)
        found += [f"container {c.name} ({c.status})" for c in containers]
        found += [f"network {n.name}" for n in client.networks.list(filters=selector)]
    return found


def leftovers(session: Session) -> list[str]:
    """Everything of ``session`` still there: its clusters' containers and networks, its live processes."""
    processes = [describe_process(pid, cmd) for pid, cmd in tagged_processes(session.tag)]
    return docker_leftovers(session.run_ids()) + processes


def wait_clean(session: Session, timeout_s: float) -> tuple[list[str], float]:
    """Poll :func:`leftovers` until there are none or ``timeout_s`` passed: (what is left, seconds waited)."""
    started = time.monotonic()
    while True:
        left = leftovers(session)
        waited = time.monotonic() - started
        if not left or waited > timeout_s:
            return left, waited
        time.sleep(0.5)


def processes_left(session: Session, timeout_s: float) -> list[str]:
    """The session's processes still alive after up to ``timeout_s`` (polled; children die asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = [describe_process(pid, cmd) for pid, cmd in tagged_processes(session.tag)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def clean_up(session: Session) -> None:
    """Kill what is left of ``session`` and remove its clusters' resources; never raises."""
    session.kill()
    for pid, _command in tagged_processes(session.tag):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for run_id in session.run_ids():
        with contextlib.suppress(Exception):
            sweep(run_id)


# ---- what a session wrote ---------------------------------------------------------------------------------


def runs_with_history(report_dir: Path) -> list[Path]:
    """The run directories under ``report_dir`` that hold a history (a ScenarioRun's ``<test>/<run id>/``)."""
    if not report_dir.is_dir():
        return []
    return [run for run in find_runs(report_dir) if (run / "history").is_dir()]


def unhealed_faults(run_dir: Path) -> list[str]:
    """The faults the run's history shows injected and never healed (a failed heal counts as not healed)."""
    injected: dict[object, FaultEvent] = {}
    healed = set()
    for event in read_events(run_dir, kinds=["fault"]):
        if not isinstance(event, FaultEvent):
            continue
        seq = json.loads(event.params).get("seq")
        if event.action == "inject":
            injected[seq] = event
        elif event.error is None:
            healed.add(seq)
    return [f"{e.fault} on {e.target} (seq {seq})" for seq, e in injected.items() if seq not in healed]


def run_with_active_fault(report_dir: Path) -> Path | None:
    """A run under ``report_dir`` whose (live) history shows a fault injected and not yet healed."""
    for run in runs_with_history(report_dir):
        try:
            if unhealed_faults(run):
                return run
        except (ChaosError, OSError, ValueError):  # a segment being written: read it again next time
            continue
    return None


def gzip_logs(directory: Path) -> list[str]:
    """The names of the ``*.log.gz`` files in ``directory``, each read to its end (a torn one raises)."""
    names = []
    for path in sorted(directory.glob("*.log.gz")):
        with gzip.open(path, "rb") as log:
            while log.read(1 << 20):
                pass
        names.append(path.name)
    return names


def torn_json(path: Path) -> str | None:
    """Why ``path`` is not a whole JSON document (``None``: absent, or valid JSON)."""
    if not path.exists():
        return None
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        return f"{path} is torn: {exc}"
    return None


def interrupted_run_problems(report_dir: Path, *, report: bool, brokers: int = 3) -> list[str]:
    """What is wrong with the one scenario run an interrupted session left under ``report_dir`` (empty:
    nothing): a fault the history shows not healed, no ``ended_ts`` in ``scenario.json``, the broker logs
    missing from its ``logs/`` (or torn), a torn ``audit.json``; with ``report``, no ``report.html``."""
    runs = runs_with_history(report_dir)
    if len(runs) != 1:
        return [f"expected one run with a history under {report_dir}, found {runs}"]
    (run,) = runs
    problems = [f"not healed: {fault}" for fault in unhealed_faults(run)]
    info = read_scenario(run)
    if info is None or info.ended_ts is None:
        problems.append(f"{run}/scenario.json has no ended_ts: {info}")
    logs = gzip_logs(run / "logs") if (run / "logs").is_dir() else []
    if len([name for name in logs if name.startswith("broker-")]) != brokers:
        problems.append(f"broker logs not captured in {run}/logs: {logs}")
    torn = torn_json(run / "audit.json")
    if torn is not None:
        problems.append(torn)
    # After an interrupt the plugin renders the test's report itself (chaos.report.hook.after_interrupt).
    if report and not (run / "report.html").is_file():
        problems.append(f"no report.html for the interrupted run in {run}: {sorted(os.listdir(run))}")
    return problems


def figures(name: str, reps: int, left: int, seconds: float) -> str:
    """Print (and return) the test's line of figures for docs/measurements.md's reliability table."""
    line = f"reliability {name}: {reps} reps, {left} leftovers, {seconds:.1f} s"
    print(f"\n{line}")
    return line


# ---- mounts (root only) -----------------------------------------------------------------------------------


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30, check=False)


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` for the block; the test is skipped when it cannot be mounted
    (mounting needs root, CAP_SYS_ADMIN)."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        done = _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    except OSError as exc:
        done = subprocess.CompletedProcess(["mount"], 1, "", str(exc))
    if done.returncode != 0:
        reason = done.stderr.strip()
        pytest.skip(f"cannot mount a {size} tmpfs at {path} (needs root / CAP_SYS_ADMIN): {reason}")
    try:
        yield path
    finally:
        unmounted = subprocess.run(["umount", str(path)], capture_output=True, timeout=30, check=False)
        if unmounted.returncode != 0:  # still busy (a process of a failed test): detach it now
            subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30, check=False)


def remount_read_only(path: Path) -> None:
    done = _mount("-o", "remount,ro", str(path))
    assert done.returncode == 0, f"remount ro of {path} failed: {done.stderr}"
