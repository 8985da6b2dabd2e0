"""The full gate on a team's real configuration (examples/gate-realistic.toml: an idempotent lz4 producer
and an auto-committing consumer from production .properties files, SASL credentials included, claiming
at_least_once), on a real cluster.

`chaos gate` runs as a team's CI runs it, in a process of its own (its pytest session starts its own
cluster; this session starts none), with `--cases L2,L6`: the smallest set that still holds the case the
lint names (L6, for auto commit) and L2, whose cut-held precondition once took a gate note for the moment
the cut was done. The inner runs are audited by the reference engine (`CHAOS_AUDIT_ENGINE=reference`) to
keep the test near three minutes; the verdict rules are the same for both engines.

Checked: no case is inconclusive or broken (a harness reason), the lint's cases ran or are listed as not
run, L6 — whose members commit as the team's consumer does — fails as the lint predicts, the exit code is
the documented one (1: the lint proves the claim broken, whatever the cases show), and the SASL password
is in no file of the output tree nor in the command's output.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.own_cluster]

ROOT: Final = Path(__file__).resolve().parents[2]
GATE: Final = ROOT / "examples" / "gate-realistic.toml"
SECRET: Final = b"pA55w0rd-realistic-7Qz9"


def _contents(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            return data + gzip.decompress(data)
        except (OSError, EOFError):
            return data
    return data


@pytest.mark.timeout(600)
def test_the_full_gate_on_a_teams_real_configuration(tmp_path: Path) -> None:
    out = tmp_path / "gate"
    # the team's file and its .properties, each case tried once: L6 is expected to fail, not to be retried
    for name in ("producer-realistic.properties", "consumer-realistic.properties"):
        shutil.copy(GATE.parent / name, tmp_path / name)
    gate = tmp_path / GATE.name
    gate.write_text(GATE.read_text(encoding="utf-8").replace("retries = 1", "retries = 0"), encoding="utf-8")
    chaos = Path(sys.executable).with_name("chaos")
    env = {**os.environ, "CHAOS_AUDIT_ENGINE": "reference"}
    started = time.monotonic()
    proc = subprocess.run(
        [str(chaos), "gate", str(gate), "--out", str(out), "--cases", "L2,L6", "--seed", "7"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=540,
        check=False,
    )
    elapsed = time.monotonic() - started
    output = proc.stdout + proc.stderr
    print(
        f"\nchaos gate: exit {proc.returncode} in {elapsed:.0f} s\n{output.decode(errors='replace')[-3000:]}"
    )

    data = json.loads((out / "gate.json").read_text(encoding="utf-8"))
    cases = {c["case"]: c for c in data["cases"]}
    # the lint's proof decides: exit 1 whatever the cases show (docs/gate.md, "Exit codes")
    assert data["lint"]["kept"] is False
    assert [v["rule"] for v in data["lint"]["violations"]] == ["commit_before_processing"]
    assert (proc.returncode, data["exit_code"], data["verdict"]) == (1, 1, "fail"), data["headline"]
    # no case inconclusive or broken: every one reached a verdict of the cases' own
    reasons = {k: [r for a in c["attempts"] for r in a["reasons"]] for k, c in cases.items()}
    errors = {k: [a["error"] for a in c["attempts"] if a["error"]] for k, c in cases.items()}
    assert set(cases) == {"L2", "L6"}
    assert all(c["outcome"] in ("pass", "fail", "flaky") for c in cases.values()), (reasons, errors)
    assert not any("the cut held" in r for rs in reasons.values() for r in rs), reasons
    # the members commit as the team's application does (auto commit): L6 shows what the lint found
    assert cases["L6"]["outcome"] == "fail", cases["L6"]
    assert "unseen_by_group" in cases["L6"]["attempts"][0]["failed_by"]
    assert data["errors"] == []
    # the lint's cases ran or are listed as not run
    named = {case for v in data["lint"]["violations"] for case in v["cases"]}
    plan = data["plan"]
    assert plan["run"] == ["L2", "L6"]
    assert plan["chosen"] == "--cases"
    assert named <= set(plan["run"]) | {n["case"] for n in plan["not_run"]}
    md = (out / "gate.md").read_text(encoding="utf-8")
    assert "**NOT KEPT by the configuration (lint)** — the run did reproduce it" in md
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "lint: at_least_once NOT KEPT by the configuration" in index
    # the secret: in no file of the tree (gzipped broker logs opened), not in the command's output
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) > 10
    leaked = [str(p.relative_to(out)) for p in files if SECRET in _contents(p)]
    assert leaked == []
    assert SECRET not in output
    assert elapsed < 300, f"the realistic gate took {elapsed:.0f} s"
