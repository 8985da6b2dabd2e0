"""``chaos shrink RUN_DIR``: search for the smallest plan that still makes a failing run fail.

A run that ran a fault plan and failed is replayed (:mod:`chaos.scenario.replay`) with smaller plans, each
candidate a whole new run judged by its verdict (``fail``: the failure is still there):

1. **drop faults** as delta debugging does: the steps split in ``n`` chunks, each chunk dropped in turn —
   the last chunk first, since a candidate's workload ends :attr:`Shrinker.tail_s` after its last heal and
   a plan without its late faults is the shortest to replay; a candidate that still fails becomes the plan
   (``n`` back towards 2), else ``n`` doubles, until single steps were tried;
2. **shorten windows**: each remaining step's duration halved (not below :data:`MIN_STEP_S`, nor below
   the window its kind needs to prove it landed: a clock fault's, :func:`~chaos.faults.plan.min_window_s`);
3. **confirm**, only when no smaller plan failed: the run's own plan replayed — a failure that does not
   come back is not shrunk (the result is inconclusive). A smaller plan that failed already proves the
   failure comes back, and a full-length replay costs as long as the run.

The search stops at ``max_tries`` replays or ``max_seconds``, whichever comes first, and keeps the smallest
failing plan found. Everything goes to the output directory: one report directory per try (``try-N/``),
``plan.shrunk.json`` and ``shrink.json`` (every attempt: what changed, its verdict, its time and run
directory).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from chaos.faults.plan import FaultStep, Plan, min_window_s
from chaos.faults.targets import describe_target
from chaos.run.files import write_atomic
from chaos.run.layout import PLAN_NAME, SCENARIO_NAME
from chaos.scenario.model import ScenarioError
from chaos.scenario.replay import Replay

MIN_STEP_S: Final = 1.0
SHRUNK_PLAN_FILE: Final = "plan.shrunk.json"
SHRINK_LOG_FILE: Final = "shrink.json"

Outcome = tuple[str, Path | None]
"""A replay's verdict (``pass``, ``fail``, ``unknown``, or ``error`` when it produced none) and its run
directory."""
Replayer = Callable[[Plan, Path], Outcome]
"""Replays a plan with its artifacts under the given directory."""


@dataclass(frozen=True)
class Attempt:
    """One replay of the search."""

    number: int
    change: str
    steps: int
    verdict: str
    seconds: float
    run_dir: Path | None

    def to_data(self) -> dict[str, object]:
        return {
            "number": self.number,
            "change": self.change,
            "steps": self.steps,
            "verdict": self.verdict,
            "seconds": round(self.seconds, 1),
            "run_dir": str(self.run_dir) if self.run_dir else None,
        }


class _Spent(Exception):
    """The search's budget (tries or time) is spent."""


def _describe(step: FaultStep) -> str:
    return f"{step.kind} on {describe_target(step.target)} at {step.at_s:g} s"


@dataclass
class Shrinker:
    """The search over ``plan`` (a failing run's resolved plan), each candidate replayed by ``replay``."""

    plan: Plan
    replay: Replayer
    out: Path
    max_tries: int = 20
    max_seconds: float = 4 * 3600.0
    tail_s: float = 30.0
    confirm: bool = True
    attempts: list[Attempt] = field(default_factory=list)
    smallest: Plan | None = None
    stopped: str = ""
    _started: float = 0.0

    def run(self) -> Plan | None:
        """The smallest failing plan found (the original one when nothing smaller fails but it does), or
        None when no replay failed (or the budget ran out before one did). ``shrink.json`` and
        ``plan.shrunk.json`` are written as it goes."""
        self._started = time.monotonic()
        best = self.plan
        try:
            best = self._drop_faults(best)
            best = self._shorten_windows(best)
            if self.smallest is None and self.confirm:
                if not self._fails(self.plan, "confirm: nothing smaller failed; the run's plan, replayed"):
                    self.stopped = "the failure did not come back when the run's plan was replayed"
                    return None
                self.smallest = self.plan
            self.stopped = "every candidate tried"
        except _Spent as spent:
            self.stopped = str(spent)
        finally:
            self._write()
        return self.smallest

    def _trimmed(self, plan: Plan) -> Plan:
        return replace(plan, length_s=round(min(plan.workload_s, plan.duration_s + self.tail_s), 3))

    def _fails(self, plan: Plan, change: str) -> bool:
        if len(self.attempts) >= self.max_tries:
            raise _Spent(f"{self.max_tries} tries spent")
        elapsed = time.monotonic() - self._started
        if elapsed + plan.workload_s > self.max_seconds:
            raise _Spent(f"{self.max_seconds:.0f} s spent (the next replay would end past it)")
        number = len(self.attempts)
        began = time.monotonic()
        verdict, run_dir = self.replay(plan, self.out / f"try-{number}")
        self.attempts.append(
            Attempt(number, change, len(plan.steps), verdict, time.monotonic() - began, run_dir)
        )
        self._write()
        return verdict == "fail"

    def _accept(self, plan: Plan) -> Plan:
        self.smallest = plan
        self._write()
        return plan

    def _drop_faults(self, best: Plan) -> Plan:
        chunks = 2
        while len(best.steps) > 1:
            size = -(-len(best.steps) // chunks)  # ceil
            groups = [range(i, min(i + size, len(best.steps))) for i in range(0, len(best.steps), size)]
            for group in reversed(groups):  # late faults first: the shortest replays
                kept = tuple(s for i, s in enumerate(best.steps) if i not in group)
                candidate = self._trimmed(replace(best, steps=kept))
                dropped = "; ".join(_describe(best.steps[i]) for i in group)
                if self._fails(candidate, f"drop {len(group)} of {len(best.steps)}: {dropped}"):
                    best = self._accept(candidate)
                    chunks = max(chunks - 1, 2)
                    break
            else:
                if chunks >= len(best.steps):
                    return best
                chunks = min(2 * chunks, len(best.steps))
        return best

    def _shorten_windows(self, best: Plan) -> Plan:
        for index in range(len(best.steps)):
            step = best.steps[index]
            shorter = round(step.duration_s / 2, 3)
            if shorter < max(MIN_STEP_S, min_window_s(step.kind)):
                continue
            steps = list(best.steps)
            steps[index] = replace(step, duration_s=shorter)
            candidate = self._trimmed(replace(best, steps=tuple(steps)))
            if self._fails(candidate, f"shorten {_describe(step)} to {shorter:g} s"):
                best = self._accept(candidate)
        return best

    def _write(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        if self.smallest is not None:
            write_atomic(self.out / SHRUNK_PLAN_FILE, self.smallest.to_json())
        log = {
            "original_steps": len(self.plan.steps),
            "smallest_steps": len(self.smallest.steps) if self.smallest is not None else None,
            "tries": len(self.attempts),
            "seconds": round(sum(a.seconds for a in self.attempts), 1),
            "stopped": self.stopped,
            "attempts": [a.to_data() for a in self.attempts],
        }
        write_atomic(self.out / SHRINK_LOG_FILE, json.dumps(log, indent=2, sort_keys=True) + "\n")


def run_verdict(run_dir: Path) -> str:
    """A finished run's verdict: its audit's, ``unknown`` when a precondition did not hold (evidence.json),
    ``error`` when it wrote no audit (it crashed)."""
    from chaos.audit.auditfile import read_audit
    from chaos.run.evidence import read_evidence

    audit = read_audit(run_dir)
    if audit is None:
        return "error"
    evidence = read_evidence(run_dir)
    return evidence.verdict(audit.verdict) if evidence is not None else audit.verdict


def pytest_replayer(again: Replay, timeout_margin_s: float = 900.0) -> Replayer:
    """Replays a candidate plan as ``chaos replay`` does, in a pytest process of its own (a cluster per try,
    never two at once), its report directory the try's."""

    def replay(plan: Plan, out: Path) -> Outcome:
        out.mkdir(parents=True, exist_ok=True)
        plan_file = write_atomic(out / PLAN_NAME, plan.to_json())
        args = replace(again, plan_file=plan_file, plan=plan, out=out).pytest_args()
        with (out / "pytest.log").open("w") as log:
            try:
                subprocess.run(
                    [sys.executable, "-m", "pytest", *args],
                    timeout=plan.workload_s + timeout_margin_s,
                    check=False,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            except subprocess.TimeoutExpired:
                return "error", None
        runs = sorted(path.parent for path in out.rglob(SCENARIO_NAME))
        if len(runs) != 1:
            return "error", runs[0] if runs else None
        return run_verdict(runs[0]), runs[0]

    return replay


def shrink_run(
    run_dir: Path, out: Path | None = None, *, max_tries: int = 20, max_seconds: float = 4 * 3600.0
) -> Shrinker:
    """Shrink the failing run in ``run_dir`` (:class:`Shrinker` with :func:`pytest_replayer`); refuses a
    run whose verdict is not ``fail``."""
    from chaos.scenario.replay import replay_of

    verdict = run_verdict(run_dir)
    if verdict != "fail":
        raise ScenarioError(
            f"{run_dir}'s verdict is {verdict}: only a failing run is shrunk (its plan still fails smaller)"
        )
    again = replay_of(run_dir)
    shrinker = Shrinker(
        again.plan,
        pytest_replayer(again),
        out or run_dir / "shrink",
        max_tries=max_tries,
        max_seconds=max_seconds,
    )
    shrinker.run()
    return shrinker
