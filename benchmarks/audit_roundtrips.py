"""A warm Spark audit of saved runs in py4j round trips, with PySpark's call-site capture and without.

    python benchmarks/audit_roundtrips.py RUN_DIR [RUN_DIR ...] [--rounds 3] [--master 'local[2]']

One session (``chaos.audit.spark.spark_session``); each run is audited twice first (discarded: the JVM's
first audits compile most of the job), then ``--rounds`` rounds alternate PySpark's
``spark.python.sql.dataFrameDebugging.enabled`` on and off (the session sets it off; this script flips
PySpark's cached value of it, a private name, to compare). Each audit prints its wall time and the commands
the py4j client sent the JVM; the facts of every audit of a run must be equal. A summary line per setting
ends the output. Timed alone (it uses every core it is given).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _count_commands() -> Callable[[], int]:
    """Count every command py4j's client connections send from now on; returns the counter's reader."""
    import py4j.clientserver as clientserver  # type: ignore[import-untyped,unused-ignore]

    sent = [0]
    send = clientserver.ClientServerConnection.send_command

    def counted(self: Any, command: str) -> Any:
        sent[0] += 1
        return send(self, command)

    clientserver.ClientServerConnection.send_command = counted
    return lambda: sent[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="saved run directories (reports/tests/…/RUN_ID)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)

    import pyspark.errors.utils as pyspark_errors  # type: ignore[import-untyped,unused-ignore]

    from chaos.audit.run import audit_facts
    from chaos.audit.spark import spark_session

    sent = _count_commands()
    spark_session(args.master)
    first = {}
    for run in args.runs:
        first[run] = audit_facts(run, engine="spark", master=args.master)
        audit_facts(run, engine="spark", master=args.master)
    seconds: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.rounds):
        for capture in (True, False):
            pyspark_errors._enable_debugging_cache = capture  # type: ignore[assignment]  # a private switch
            for run in args.runs:
                before, started = sent(), time.monotonic()
                facts = audit_facts(run, engine="spark", master=args.master)
                took = time.monotonic() - started
                if facts != first[run]:
                    print(f"{run}: the facts differ between audits", file=sys.stderr)
                    return 1
                seconds[capture].append(took)
                print(f"call sites {'on ' if capture else 'off'} {run.name}: {took:6.1f} s, "
                      f"{sent() - before:,} py4j commands", flush=True)  # fmt: skip
    for capture, each in seconds.items():
        print(f"# call sites {'on' if capture else 'off'}: {sum(each):.1f} s in {len(each)} audits "
              f"({min(each):.1f}-{max(each):.1f} s each)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
