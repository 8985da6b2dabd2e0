"""The warm Spark server (``chaos spark start``) against a command's own Spark, on saved runs, as ratios.

    python benchmarks/warm_bench.py RUN_DIR [RUN_DIR ...] [--rounds 3] [--json]

For each run, in one go on one machine (time it alone: it uses both cores):

- **cold**: a new process audits on its own ``local[2]`` — its JVM's start and first audit;
- **warm local**: audits 2.. of one process on ``local[2]`` (its JVM warm);
- with the warm server up (this script starts it and stops it; it refuses to run beside one it did not
  start): **new process** — a new process per round audits on it, as every command does; **warm on
  server** — audits 2.. of one process on it.

Each audit's own time is measured inside its process (the process's wall time, Python's start and imports
included, is printed beside it). The summary gives the medians and the ratios the issue's targets name: a
new process's audit on the warm server / a warm audit on it, and the cold command / the same on the server.
Every audit's verdict must match the run's first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_CHILD = """
import json, sys, time
from chaos.audit.run import audit_run
for _ in range(int(sys.argv[3])):
    started = time.monotonic()
    result = audit_run(sys.argv[1], guarantee="at_least_once", master=sys.argv[2], write=False)
    print(json.dumps({"audit_s": time.monotonic() - started, "verdict": result.verdict}), flush=True)
"""


def _audits(run: Path, master: str, count: int) -> list[dict[str, float | str]]:
    """``count`` audits in one new Python process: each one's time and verdict; the process's wall time
    is the first one's ``wall_s``."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(run), master, str(count)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"audit of {run} on {master} failed:\n{done.stderr[-3000:]}")
    found: list[dict[str, float | str]] = [
        json.loads(line) for line in done.stdout.strip().splitlines()[-count:]
    ]
    found[0]["wall_s"] = time.monotonic() - started
    return found


def _new_process(run: Path, master: str) -> dict[str, float | str]:
    """One audit in a new process, as a command makes it."""
    return _audits(run, master, 1)[0]


def _in_one_process(run: Path, master: str, rounds: int) -> list[dict[str, float | str]]:
    """Audits 2..``rounds + 1`` of one process (the first, its warm-up, dropped)."""
    return _audits(run, master, rounds + 1)[1:]


def _median(rows: list[dict[str, float | str]], key: str) -> float:
    return statistics.median(float(r[key]) for r in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="one JSON object per run instead of text")
    args = parser.parse_args()
    from chaos.audit import warm

    if warm.running() is not None:
        raise SystemExit("a warm Spark server is already up: stop it first (chaos spark stop)")
    results: dict[str, dict[str, object]] = {}
    for run in args.runs:
        cold = _new_process(run, "local[2]")
        local = _in_one_process(run, "local[2]", args.rounds)
        results[str(run)] = {"cold": cold, "warm_local": local}
    started = time.monotonic()
    server = warm.start()
    start_s = time.monotonic() - started
    try:
        for run in args.runs:
            fresh = [_new_process(run, server.url) for _ in range(args.rounds)]
            on_server = _in_one_process(run, server.url, args.rounds)
            results[str(run)] |= {"new_process": fresh, "warm_on_server": on_server}
    finally:
        warm.stop()
    for run, found in results.items():
        rows = [found["cold"], *found["warm_local"], *found["new_process"], *found["warm_on_server"]]  # type: ignore[misc]
        verdicts = {r["verdict"] for r in rows}
        if len(verdicts) != 1:
            raise SystemExit(f"{run}: verdicts differ between audits: {verdicts}")
        summary = {
            "cold_s": found["cold"]["audit_s"],  # type: ignore[index]
            "cold_wall_s": found["cold"]["wall_s"],  # type: ignore[index]
            "warm_local_s": _median(found["warm_local"], "audit_s"),  # type: ignore[arg-type]
            "new_process_s": _median(found["new_process"], "audit_s"),  # type: ignore[arg-type]
            "new_process_wall_s": _median(found["new_process"], "wall_s"),  # type: ignore[arg-type]
            "warm_on_server_s": _median(found["warm_on_server"], "audit_s"),  # type: ignore[arg-type]
            "server_start_s": start_s,
        }
        summary["new_process_over_warm"] = summary["new_process_s"] / summary["warm_on_server_s"]
        summary["cold_over_new_process"] = summary["cold_s"] / summary["new_process_s"]
        if args.json:
            print(json.dumps({"run": run, "verdict": verdicts.pop(), **summary, "audits": found}))
            continue
        print(
            f"{run}: cold {summary['cold_s']:.1f} s (process {summary['cold_wall_s']:.1f} s); warm local "
            f"{summary['warm_local_s']:.1f} s; warm server (started in {start_s:.1f} s): new process "
            f"{summary['new_process_s']:.1f} s (process {summary['new_process_wall_s']:.1f} s), warm "
            f"{summary['warm_on_server_s']:.1f} s; new process / warm "
            f"{summary['new_process_over_warm']:.2f}x, "
            f"cold / new process {summary['cold_over_new_process']:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
