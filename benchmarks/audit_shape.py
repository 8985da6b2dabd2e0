"""The shape of a small run's Spark audit: jobs, stages and DataFrame actions, and its seconds.

    python benchmarks/audit_shape.py [RUN_DIR ...] [--rounds 3] [--values 200] [--small-below N] [--json]

Each run is audited in a new process on its own ``local[2]`` (``audit_facts``, as a command does): the
first audit (its JVM fresh) and ``--rounds`` more (warm), each counted with
:func:`chaos.audit.shape.counted` — ``audit``: the whole ``audit_facts`` call, ``job``: the
``spark_audit`` call within it. No RUN_DIR: the class archive's training run (``--values`` values, about
five events each; a fault, a consumer, the drain), recorded in a temporary directory. ``--small-below``
sets :data:`chaos.audit.sizing.SMALL_HISTORY_BELOW_ROWS` in the audits' process (0: every history audited
in the large shape). Time it alone: it uses both cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_CHILD = """
import json, sys, time
import chaos.audit.sizing as sizing
import chaos.audit.sparkjob as sparkjob
from chaos.audit.run import audit_facts
from chaos.audit.shape import counted
from chaos.audit.spark import SCENARIO_MASTER, spark_session

if sys.argv[3]:
    sizing.SMALL_HISTORY_BELOW_ROWS = int(sys.argv[3])
spark = spark_session(SCENARIO_MASTER)
inner = []
audit = sparkjob.spark_audit

def spark_audit(*args, **kwargs):
    with counted(spark) as tally:
        started = time.monotonic()
        found = audit(*args, **kwargs)
    inner.append((tally.shape, time.monotonic() - started))
    return found

sparkjob.spark_audit = spark_audit
for _ in range(int(sys.argv[2])):
    started = time.monotonic()
    with counted(spark) as tally:
        facts = audit_facts(sys.argv[1], engine="spark", master=SCENARIO_MASTER)
    shape, job_s = inner.pop()
    print(json.dumps({
        "audit_s": time.monotonic() - started, "job_s": job_s, "facts": repr(facts),
        "audit": {"jobs": tally.shape.jobs, "stages": tally.shape.stages, "skipped": tally.shape.skipped,
                  "actions": tally.shape.actions},
        "job": {"jobs": shape.jobs, "stages": shape.stages, "skipped": shape.skipped,
                "actions": shape.actions},
    }), flush=True)
"""


def audits(run: Path, count: int, small_below: int | None = None) -> list[dict[str, object]]:
    """``count`` counted audits of ``run`` in one new Python process, the first on a fresh JVM."""
    below = "" if small_below is None else str(small_below)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(run), str(count), below],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"audit of {run} failed:\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.strip().splitlines()[-count:]]


def _line(run: str, found: list[dict[str, object]]) -> str:
    first, warm = found[0], found[1:]
    job = first["job"]
    assert isinstance(job, dict)
    actions = sum(job["actions"].values())
    warm_s = statistics.median(float(r["audit_s"]) for r in warm)  # type: ignore[arg-type]
    warm_job_s = statistics.median(float(r["job_s"]) for r in warm)  # type: ignore[arg-type]
    return (
        f"{run}: spark_audit {job['jobs']} jobs, {job['stages']} stages ({job['skipped']} skipped), "
        f"{actions} actions {job['actions']}; whole audit {first['audit']}; "
        f"first audit {first['audit_s']:.1f} s (job {first['job_s']:.1f} s), "
        f"warm median {warm_s:.2f} s (job {warm_job_s:.2f} s)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--values", type=int, default=200, help="values of the generated run")
    parser.add_argument(
        "--small-below", type=int, default=None, help="SMALL_HISTORY_BELOW_ROWS for the audits"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per run instead of text")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="chaos-audit-shape-") as tmp:
        runs = args.runs
        if not runs:
            from chaos.audit.archive_build import record_training_run

            runs = [Path(tmp) / "training"]
            record_training_run(runs[0], "training", args.values)
        for run in runs:
            found = audits(run, args.rounds + 1, args.small_below)
            if len({r["facts"] for r in found}) != 1:
                raise SystemExit(f"{run}: the facts differ between audits")
            print(json.dumps({"run": str(run), "audits": found}) if args.json else _line(str(run), found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
