"""``python -m chaos.scenario.record_workload``: run a composed workload
(:func:`chaos.workload.composed.run_workload`) in this process, recording its history with a
:class:`~chaos.history.Recorder` in the context's ``run_dir``.

Stdin holds one :func:`~chaos.workload.common.child_payload` line: the run's context (``run_dir`` set) and
the :class:`~chaos.workload.composed.WorkloadPlan`. It prints ``progress <wall ts> <events recorded> <events
written>`` every 0.25 s while it runs and ``done <result JSON>`` at the end, so a test can SIGKILL it
mid-run and know what the history must hold. It composes the workload and the history, so it lives
where compositions do (neither stage imports the other).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import asdict, replace

from chaos.errors import ConfigError
from chaos.history.recorder import Recorder
from chaos.workload.common import read_child_payload
from chaos.workload.composed import WorkloadPlan, run_workload


def main() -> int:
    """Run the plan read from stdin in its context, recording into the context's run directory."""
    pending, data = read_child_payload(sys.stdin.readline(), lambda event: None)
    if pending.run_dir is None:
        raise ConfigError("record_workload: the context needs a run_dir to record the history into")
    plan = WorkloadPlan.from_data(data)
    with Recorder(pending.run_dir, pending.run_id) as history:
        context = replace(pending, sink=history.record)
        stop = threading.Event()

        def report() -> None:
            while not stop.wait(0.25):
                stats = history.stats()
                print(f"progress {time.time():.3f} {stats.recorded} {stats.written}", flush=True)

        reporter = threading.Thread(target=report, daemon=True)
        reporter.start()
        try:
            result = run_workload(context, plan)
        finally:
            stop.set()
            reporter.join(2.0)
    print(f"done {json.dumps(asdict(result))}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
