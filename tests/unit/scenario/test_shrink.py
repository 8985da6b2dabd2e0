"""``chaos shrink``'s search, with a replayer whose verdict is a rule of the plan (the real one replays a
whole run per try: tests/unit/scenario/test_replay.py covers its command line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.faults.plan import FaultStep, Plan
from chaos.faults.targets import ActiveController, LeaderOf
from chaos.scenario import ScenarioError
from chaos.scenario.shrink import (
    SHRINK_LOG_FILE,
    SHRUNK_PLAN_FILE,
    Outcome,
    Shrinker,
    run_verdict,
    shrink_run,
)

CULPRIT = FaultStep(40.0, 8.0, "crash", 2)
PLAN = Plan(
    9,
    3,
    (
        FaultStep(3.0, 5.0, "pause", 1),
        FaultStep(10.0, 4.0, "latency", LeaderOf("{topic}", 1), (("ms", 300), ("paths", ("ext",)))),
        FaultStep(16.0, 6.0, "network_cut", 3),
        FaultStep(25.0, 3.0, "partition", ActiveController()),
        CULPRIT,
        FaultStep(52.0, 5.0, "stop", 1),
        FaultStep(60.0, 4.0, "pause", 3),
        FaultStep(70.0, 6.0, "crash", 1),
    ),
    600.0,
)


class Oracle:
    """Fails while the plan crashes broker 2 for at least ``need_s`` (``never``: not even the whole plan
    fails again); records what it was asked."""

    def __init__(self, need_s: float = 2.0, never: bool = False) -> None:
        self.need_s = need_s
        self.never = never
        self.plans: list[Plan] = []

    def __call__(self, plan: Plan, out: Path) -> Outcome:
        self.plans.append(plan)
        out.mkdir(parents=True)
        if self.never:
            return "pass", out
        crashed = any(s.kind == "crash" and s.target == 2 and s.duration_s >= self.need_s for s in plan.steps)
        return ("fail" if crashed else "pass"), out


def test_the_search_finds_the_one_fault_that_fails_and_shortens_it(tmp_path: Path) -> None:
    oracle = Oracle(need_s=4.0)
    shrinker = Shrinker(PLAN, oracle, tmp_path, max_tries=40)
    smallest = shrinker.run()
    assert smallest is not None
    assert [(s.kind, s.target, s.at_s, s.duration_s) for s in smallest.steps] == [("crash", 2, 40.0, 4.0)]
    assert smallest.length_s == 40.0 + 4.0 + shrinker.tail_s  # the workload ends 30 s after the last heal
    # the late half is dropped first: the shortest replay; a smaller plan that fails needs no confirmation
    assert [s.at_s for s in oracle.plans[0].steps] == [3.0, 10.0, 16.0, 25.0]
    assert oracle.plans[0].length_s == 25.0 + 3.0 + shrinker.tail_s
    assert PLAN not in oracle.plans
    assert all(len(p.steps) < len(PLAN.steps) for p in oracle.plans)
    assert shrinker.stopped == "every candidate tried"
    assert len(shrinker.attempts) < 20  # delta debugging, not one replay per subset
    assert Plan.read(tmp_path / SHRUNK_PLAN_FILE) == smallest
    log = json.loads((tmp_path / SHRINK_LOG_FILE).read_text())
    assert (log["original_steps"], log["smallest_steps"], log["tries"]) == (8, 1, len(shrinker.attempts))
    assert [a["verdict"] for a in log["attempts"]].count("fail") >= 3
    assert all(Path(a["run_dir"]).name == f"try-{a['number']}" for a in log["attempts"])


def test_when_nothing_smaller_fails_the_whole_plan_is_replayed_once(tmp_path: Path) -> None:
    oracle = Oracle(never=True)
    shrinker = Shrinker(PLAN, oracle, tmp_path, max_tries=40)
    assert shrinker.run() is None
    assert oracle.plans[-1] == PLAN  # the confirmation, last
    assert shrinker.attempts[-1].change.startswith("confirm")
    assert "did not come back" in shrinker.stopped
    assert not (tmp_path / SHRUNK_PLAN_FILE).exists()
    only_two = Plan(9, 3, (CULPRIT, FaultStep(70.0, 6.0, "crash", 1)), 600.0)
    kept = Shrinker(only_two, Oracle(need_s=9.0, never=False), tmp_path / "minimal", max_tries=40)
    assert kept.run() is None  # 8 s of crash never reaches need_s = 9: no replay fails


def test_the_budget_bounds_the_search_and_keeps_the_best_so_far(tmp_path: Path) -> None:
    shrinker = Shrinker(PLAN, Oracle(), tmp_path, max_tries=3)
    smallest = shrinker.run()
    assert len(shrinker.attempts) == 3
    assert shrinker.stopped == "3 tries spent"
    assert smallest is not None
    assert [s.at_s for s in smallest.steps] == [40.0, 52.0]  # 8 faults -> 4 (late half kept) -> 2
    assert CULPRIT in smallest.steps
    timed = Shrinker(PLAN, Oracle(), tmp_path / "timed", max_seconds=30.0)
    assert timed.run() is None  # the shortest candidate's 58 s replay does not fit in 30 s: nothing run
    assert timed.attempts == []
    assert "30 s spent" in timed.stopped


def test_only_a_failing_run_is_shrunk(tmp_path: Path) -> None:
    assert run_verdict(tmp_path) == "error"  # no audit.json: the run crashed
    with pytest.raises(ScenarioError, match="verdict is error: only a failing run is shrunk"):
        shrink_run(tmp_path)


def test_clock_and_disk_steps_shrink_like_any_other_and_keep_the_window_they_need(tmp_path: Path) -> None:
    """A plan drawn with the opt-in kinds: the failing disk fault is found, and a clock step's window is
    never halved below what its proof of landing needs."""
    disk = FaultStep(20.0, 8.0, "disk_full", 2)
    jump = FaultStep(3.0, 6.0, "clock_jump", 1, (("by", -90),))
    plan = Plan(5, 3, (jump, FaultStep(12.0, 5.0, "clock_drift", 3, (("rate", 2.5),)), disk), 120.0)
    asked: list[Plan] = []

    def oracle(candidate: Plan, out: Path) -> Outcome:
        asked.append(candidate)
        out.mkdir(parents=True)
        kinds = {s.kind for s in candidate.steps}
        return ("fail" if {"disk_full", "clock_jump"} <= kinds else "pass"), out

    smallest = Shrinker(plan, oracle, tmp_path, max_tries=30).run()
    assert smallest is not None
    assert [s.kind for s in smallest.steps] == ["clock_jump", "disk_full"]
    assert [s.duration_s for s in smallest.steps] == [6.0, 4.0]  # 6 s halved is 3 s: below a clock's 4 s
    assert all(s.duration_s >= 4.0 for p in asked for s in p.steps if s.kind.startswith("clock"))
