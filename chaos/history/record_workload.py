"""``python -m chaos.history.record_workload RUN_DIR RUN_ID BOOTSTRAP``: run a composed workload
(:func:`chaos.workload.runner.run_workload`, its :class:`~chaos.workload.runner.WorkloadPlan` as one JSON
line on stdin) in this process, recording its history with a :class:`~chaos.history.Recorder`.

It prints ``progress <wall ts> <events recorded> <events written>`` every 0.25 s while it runs and ``done
<result JSON>`` at the end, so a test can SIGKILL it mid-run and know what the history must hold. It lives
with the history (which may import the workload), not with the workload (which must not import the
history).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

from chaos.history.recorder import Recorder
from chaos.workload.runner import WorkloadPlan, run_workload


def main(argv: list[str]) -> int:
    """Run the plan read from stdin against ``BOOTSTRAP``, recording into ``RUN_DIR`` as ``RUN_ID``."""
    run_dir, run_id, bootstrap = argv
    plan = WorkloadPlan.from_json(sys.stdin.readline())
    with Recorder(Path(run_dir), run_id) as history:
        stop = threading.Event()

        def report() -> None:
            while not stop.wait(0.25):
                stats = history.stats()
                print(f"progress {time.time():.3f} {stats.recorded} {stats.written}", flush=True)

        reporter = threading.Thread(target=report, daemon=True)
        reporter.start()
        try:
            result = run_workload(bootstrap, history.record, run_id, plan)
        finally:
            stop.set()
            reporter.join(2.0)
    print(f"done {json.dumps(asdict(result))}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
