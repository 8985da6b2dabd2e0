"""Entry point for ``spark-submit`` (or ``python -m chaos.gate.job``): audit one saved run on any master and
judge it.

python -m chaos.gate.job RUN_DIR --master spark://host:7077 --guarantee at_least_once
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from chaos.audit.facts import ISOLATION_LEVELS, AuditOptions
from chaos.errors import ChaosError
from chaos.history import RunDir
from chaos.run.terms import GUARANTEES, HARNESS_ERROR_EXIT, VERDICT_EXIT


def main(argv: list[str] | None = None) -> int:
    """Audit RUN_DIR (a local directory or a URI Spark reads: file://, hdfs://, s3a://…) with the Spark
    engine, write audit.json (into RUN_DIR, or --out), print the verdict; exit 0 pass, 1 fail, 3 unknown,
    2 a harness error or bad input."""
    from chaos.audit.auditfile import write_audit
    from chaos.audit.run import TopicSource, audit_run, is_uri

    parser = argparse.ArgumentParser(prog="chaos.gate.job", description=main.__doc__)
    parser.add_argument("run_dir")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--guarantee", choices=GUARANTEES, default="at_least_once")
    parser.add_argument("--bootstrap", default=None, help="read the topic through Kafka (else: the drain)")
    parser.add_argument("--topic", action="append", default=[])
    parser.add_argument("--group-isolation", choices=ISOLATION_LEVELS, default="read_committed")
    parser.add_argument("--max-examples", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None, help="write audit.json here (needed for a URI)")
    args = parser.parse_args(argv)
    topic = TopicSource(args.bootstrap, tuple(args.topic)) if args.bootstrap else None
    if is_uri(args.run_dir):
        if args.out is None:
            print(f"error: {args.run_dir} is a URI: say where audit.json goes: --out FILE", file=sys.stderr)
            return HARNESS_ERROR_EXIT
    elif not RunDir.of(Path(args.run_dir)).has_history():
        print(
            f"error: {args.run_dir} holds no history (history/events.parquet): give the directory of "
            "one run, reports/tests/<test>/<run id>/",
            file=sys.stderr,
        )
        return HARNESS_ERROR_EXIT
    try:
        result = audit_run(
            args.run_dir,
            guarantee=args.guarantee,
            engine="spark",
            master=args.master,
            topic=topic,
            options=AuditOptions(args.group_isolation, args.max_examples),
            write=False,
        )
    except ChaosError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return HARNESS_ERROR_EXIT
    written = write_audit(args.run_dir, result, path=args.out)
    print(f"{result.verdict} ({result.guarantee}): {written}")
    return VERDICT_EXIT[result.verdict]


if __name__ == "__main__":
    sys.exit(main())
