"""A process killed with SIGKILL mid-run leaves a readable history holding all but its last second."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from chaos.history import RunDir, compact_history, load_history

REPO = Path(__file__).resolve().parents[3]

# Two threads record as fast as they can (a worst case: no I/O waits); the main thread reports, every
# 50 ms, how many events each thread's record() calls had returned *before* the timestamp it prints.
CHILD = r"""
import sys, threading, time
from chaos.history import Recorder, SendInvoke, value_id_for

RUN = "sigkill-run"
recorder = Recorder(sys.argv[1], RUN, flush_interval=0.2)
counts = [0, 0]

def work(t):
    name = f"producer-{t}"
    seq = 0
    while True:
        recorder.record(SendInvoke(run_id=RUN, process=name, value_id=value_id_for(RUN, name, seq),
                                   producer=name, seq=seq, topic="chaos", key=str(seq % 7)))
        seq += 1
        counts[t] = seq

for t in range(2):
    threading.Thread(target=work, args=(t,), daemon=True).start()
print("ready", flush=True)
while True:
    time.sleep(0.05)
    c0, c1 = counts
    print(f"progress {time.time():.6f} {c0} {c1}", flush=True)
"""

EXIT_WITHOUT_CLOSE = r"""
import sys
from chaos.history import Recorder, ProbeCall
recorder = Recorder(sys.argv[1], "exit-run", flush_interval=0.5)
for i in range(100):
    recorder.record(ProbeCall(run_id="exit-run", process="probe", operation="metadata", duration_ms=float(i)))
# no close(), no flush(): the interpreter exits with the events still pending
"""


def _spawn(script: str, run_dir: Path) -> subprocess.Popen[str]:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path)
    return subprocess.Popen(
        [sys.executable, "-u", "-c", script, str(run_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str | None]:
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.strip())
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def test_sigkill_keeps_everything_recorded_more_than_a_second_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = _spawn(CHILD, tmp_path)
    try:
        lines = _lines(proc)
        first = lines.get(timeout=60)
        if first != "ready":
            proc.kill()
            assert proc.stderr is not None
            pytest.fail(f"child did not start: {first!r}\n{proc.stderr.read()}")
        progress: list[tuple[float, int, int]] = []
        kill_at = time.time() + 1.5
        while time.time() < kill_at:
            try:
                line = lines.get(timeout=max(0.0, kill_at - time.time()))
            except queue.Empty:
                break
            assert line is not None, "child exited early"
            fields = line.split()
            progress.append((float(fields[1]), int(fields[2]), int(fields[3])))
        killed_at = time.time()
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    horizon = killed_at - 1.0
    required = [0, 0]
    for ts, c0, c1 in progress:
        if ts <= horizon:
            required = [max(required[0], c0), max(required[1], c1)]
    assert min(required) > 100, f"the child recorded too little to test anything: {progress[:5]}"

    loaded = load_history(tmp_path)
    assert loaded.source == "jsonl"
    assert loaded.torn_lines <= 1
    seqs: dict[str, list[int]] = {"producer-0": [], "producer-1": []}
    table = loaded.table
    for process, seq in zip(table["process"].to_pylist(), table["seq"].to_pylist(), strict=True):
        seqs[process].append(seq)
    for t in (0, 1):
        on_disk = seqs[f"producer-{t}"]
        assert on_disk == list(range(len(on_disk))), "a hole or reordering in a thread's events"
        assert len(on_disk) >= required[t], (
            f"producer-{t}: {required[t]} events were recorded more than 1 s before the kill, "
            f"only {len(on_disk)} are on disk"
        )
    last = progress[-1]
    with capsys.disabled():
        print(
            f"\n[history] SIGKILL: child reported {last[1] + last[2]} recorded "
            f"{killed_at - last[0]:.2f}s before the kill; {table.num_rows} on disk "
            f"(needed >= {sum(required)}), "
            f"torn lines {loaded.torn_lines}"
        )

    compact_history(tmp_path)
    compacted = load_history(tmp_path)
    assert compacted.source == "parquet"
    assert compacted.table.num_rows == loaded.table.num_rows
    assert compacted.torn_lines == loaded.torn_lines
    assert RunDir.of(tmp_path).segment_paths() == []


def test_exit_without_close_still_flushes(tmp_path: Path) -> None:
    proc = _spawn(EXIT_WITHOUT_CLOSE, tmp_path)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    loaded = load_history(tmp_path)
    assert loaded.source == "jsonl"
    assert loaded.table["duration_ms"].to_pylist() == [float(i) for i in range(100)]
