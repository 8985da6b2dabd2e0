"""Reliability 7: a run's reaper trusts its own run only.

A decoy container (the local jre-base image, ``sleep 300``) carries ``chaos-harness=decoy-<hex>``. A child
process starts a :class:`~chaos.cluster.reaper.Reaper` for a run of its own and holds its registration, as
a cluster does. Then, each on a fresh connection to the reaper's port, a raw client asks for the decoy's
label, the bare ``chaos-harness`` label (every run), the run's label widened with the decoy's, and the run's
own label a second time (hijacking a registration): every one is answered ``ERR`` and closed. The owner is
then SIGKILLed, like a dead runner: the reaper reaps its run after RYUK_RECONNECTION_TIMEOUT (10 s) and
exits — and the decoy is still there, running.
"""

from __future__ import annotations

import contextlib
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import docker.errors
import pytest

from chaos.cluster.engine import LABEL, docker_client, labelled_containers
from chaos.cluster.images import ensure_images
from chaos.cluster.ports import free_loopback_ports
from chaos.cluster.reaper import reaper_name
from chaos.cluster.sweep import sweep
from chaos.faults.network import sidecar_image
from tests.reliability.inner import REAP_S, figures, wait_for

pytestmark = pytest.mark.reliability

OWNER = """
import sys
import time
from pathlib import Path

from chaos.cluster.reaper import Reaper

image, run_id, port, ready = sys.argv[1:]
Reaper(image, run_id, int(port)).start()  # registered: the socket stays open while this process lives
Path(ready).write_text("registered")
time.sleep(600)
"""


def ask(port: int, line: str) -> tuple[str, bool]:
    """Send one protocol line on a fresh connection: (the answer line, whether the reaper then closed it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"{line}\n".encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(1024)
            if not chunk:
                break
            data += chunk
        try:
            closed = sock.recv(1024) == b""
        except TimeoutError:
            closed = False
    return data.decode(errors="replace").strip(), closed


def reaper_running(run_id: str) -> bool:
    labelled = labelled_containers(f"{LABEL}={run_id}")
    return any(c.name == reaper_name(run_id) for c in labelled)


@pytest.mark.timeout(300)
def test_reaper_refuses_a_foreign_label_filter(tmp_path: Path) -> None:
    started = time.monotonic()
    decoy_label = f"decoy-{secrets.token_hex(4)}"
    run_id = f"rel{secrets.token_hex(5)}"
    foreign = [
        f"label={LABEL}={decoy_label}",
        f"label={LABEL}",
        f"label={LABEL}={run_id}&label={LABEL}={decoy_label}",
        f"label={LABEL}={run_id}",  # the run's own filter, from a second client: the first one owns it
    ]
    client = docker_client()
    reaper_image = ensure_images().reaper
    decoy = client.containers.run(
        sidecar_image(),
        ["sleep", "300"],
        name=f"chaos-{decoy_label}",
        labels={LABEL: decoy_label},
        detach=True,
    )
    ready = tmp_path / "registered"
    (port,) = free_loopback_ports(1)
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, reaper_image, run_id, str(port), str(ready)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:

        def registered() -> bool:
            if owner.poll() is not None:
                output = owner.stdout.read() if owner.stdout is not None else ""
                raise AssertionError(f"the reaper's owner exited ({owner.returncode}):\n{output}")
            return ready.exists()

        wait_for("the owner registered with its reaper", registered, 90)
        answers = {line: ask(port, line) for line in foreign}
        accepted = {line: a for line, (a, _) in answers.items() if not a.startswith("ERR")}
        kept_open = [line for line, (_, closed) in answers.items() if not closed]
        assert accepted == {}, f"the reaper of {run_id} accepted foreign filters: {accepted}"
        assert kept_open == [], f"the reaper kept a refused connection open: {kept_open}"

        owner.send_signal(signal.SIGKILL)  # the runner dies: its registration's socket closes
        owner.wait(10)
        wait_for(
            f"the reaper of {run_id} reaps its run and exits", lambda: not reaper_running(run_id), REAP_S
        )

        try:
            decoy.reload()
        except docker.errors.NotFound:
            pytest.fail(f"the reaper of {run_id} removed the decoy {decoy.name} (label {decoy_label})")
        assert decoy.status == "running", f"the decoy is {decoy.status} after the reaper of {run_id} reaped"
        left = labelled_containers(f"{LABEL}={run_id}", client=client)
        figures("reaper_trust", len(foreign), len(left), time.monotonic() - started)
        assert left == [], f"the reaper left its own run's containers: {[c.name for c in left]}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            owner.kill()
        owner.wait(10)
        with contextlib.suppress(Exception):
            decoy.remove(force=True)
        with contextlib.suppress(Exception):
            sweep(run_id)
