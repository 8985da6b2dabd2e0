"""``stop_spark`` leaves no JVM behind: not one still starting in the background, not one fully started.

A fresh process of its own (the suite's shared Spark session stays untouched): the background start is
stopped as soon as its first child process appears (its JVM does not watch our exit yet), then a session
is started in the foreground, stopped, and started again (a stop leaves the process able to start anew).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, os, time
    from chaos.audit import spark

    def alive(pid):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return stat.read().rpartition(")")[2].split()[0] != "Z"
        except OSError:
            return False

    found = {}
    spark.start_in_background("local[1]")
    # stopped as soon as its first process is there: the JVM behind it takes seconds to start (a fixed
    # half second was too short on a busy machine, where importing PySpark alone can take longer)
    deadline = time.monotonic() + 60
    while not spark._children() and time.monotonic() < deadline:
        time.sleep(0.02)
    found["starting_children"] = sorted(spark._children())
    spark.stop_spark()
    found["after_starting_stop"] = sorted(p for p in spark._children() if alive(p))

    session = spark.spark_session("local[1]")
    from pyspark import SparkContext
    jvm = SparkContext._gateway.proc.pid
    found["count"] = session.range(3).count()
    begun = time.monotonic()
    spark.stop_spark()
    found["stop_s"] = time.monotonic() - begun
    found["jvm_alive_after_stop"] = alive(jvm)
    found["jvm_running"] = spark.jvm_running()
    found["count_again"] = spark.spark_session("local[1]").range(4).count()
    spark.stop_spark()
    found["after_last_stop"] = sorted(p for p in spark._children() if alive(p))
    print(json.dumps(found))
    """
)


@pytest.mark.timeout(180)
def test_stop_spark_ends_a_starting_and_a_started_jvm() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=170)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["starting_children"], "the background start launched no process: the test saw nothing"
    assert found["after_starting_stop"] == []
    assert found["count"] == 3
    assert found["jvm_alive_after_stop"] is False
    assert found["jvm_running"] is False
    assert found["stop_s"] < 10
    assert found["count_again"] == 4
    assert found["after_last_stop"] == []
