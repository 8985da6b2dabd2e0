"""The CI pipelines a team copies (examples/ci/) are valid YAML, and every ``chaos`` command they run parses
against this CLI with those options — click's own parser, the command not executed — so a renamed option
breaks this test, not a team's release pipeline. Each one lints, runs the gate, keeps gate.md, the JUnit
file and the report tree, and cleans up."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from chaos.cli import cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "ci"
GATE_FILE = ROOT / "examples" / "gate-strong.toml"  # stands in for the team's gate file (it must exist)
_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((EXAMPLES / name).read_text())
    assert isinstance(data, dict), f"{name} is not a YAML mapping"
    return data


def github() -> tuple[dict[str, Any], list[str], dict[str, str]]:
    """The gate job, its shell lines and its env."""
    data = load("github-actions.yml")
    (job,) = data["jobs"].values()
    lines = [line for step in job["steps"] if "run" in step for line in step["run"].splitlines()]
    return job, lines, {k: str(v) for k, v in job["env"].items()}


def gitlab() -> tuple[dict[str, Any], list[str], dict[str, str]]:
    data = load("gitlab-ci.yml")
    job = data["kafka-resilience-gate"]
    lines = [line for key in ("before_script", "script", "after_script") for line in job[key]]
    return job, lines, {k: str(v) for k, v in job["variables"].items()}


def chaos_commands(lines: list[str], env: Mapping[str, str]) -> Iterator[list[str]]:
    """The arguments of every ``chaos`` invocation in ``lines`` (after ``&&`` too), variables expanded."""
    values = {**env, "GATE_FILE": str(GATE_FILE)}
    for line in lines:
        for part in line.split("&&"):
            expanded = _VARIABLE.sub(lambda m: values.get(m.group(1), m.group(0)), part)
            words = shlex.split(expanded)
            if words and words[0] == "chaos":
                yield words[1:]


def parse(args: list[str]) -> click.Context:
    """Parse ``args`` down to the leaf command as ``chaos`` would, without running it."""
    ctx = cli.make_context("chaos", list(args))
    command: click.Command = cli
    while isinstance(command, click.Group):
        name, sub, rest = command.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        assert sub is not None, f"chaos {' '.join(args)}: no such command"
        ctx = sub.make_context(name or "", rest, parent=ctx)
        command = sub
    return ctx


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


@pytest.mark.parametrize("pipeline", [github, gitlab], ids=["github-actions", "gitlab-ci"])
def test_every_chaos_command_in_the_pipeline_parses_with_its_options(pipeline: Any) -> None:
    _, lines, env = pipeline()
    commands = list(chaos_commands(lines, env))
    assert [c[0] for c in commands] == ["gate", "images", "gate", "clean"], commands
    for args in commands:
        ctx = parse(args)
        assert ctx.command.callback is not None
    lint, _, gate, _ = commands
    assert "--check-only" in lint
    assert Path(gate[1]) == GATE_FILE
    assert parse(commands[1]).params["kafka_version"] == env["CHAOS_KAFKA_VERSION"]


@pytest.mark.parametrize("pipeline", [github, gitlab], ids=["github-actions", "gitlab-ci"])
def test_the_pipeline_keeps_the_gates_summary_junit_and_report_tree(pipeline: Any) -> None:
    job, lines, env = pipeline()
    gate = next(c for c in chaos_commands(lines, env) if c[0] == "gate" and "--check-only" not in c)
    out, junit = option(gate, "--out"), option(gate, "--junit")
    summary = f"{out}/gate.md"
    assert any(summary in line for line in lines), f"nothing shows {summary}"
    if pipeline is github:
        assert any(summary in line and "$GITHUB_STEP_SUMMARY" in line for line in lines)
        upload = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact"))
        assert upload["if"] == "always()"
        kept = [upload["with"]["path"]]
    else:
        assert job["artifacts"]["when"] == "always"
        assert job["artifacts"]["reports"]["junit"] == junit
        kept = job["artifacts"]["paths"]
    for path in (out, junit):
        assert any(os.path.normpath(path).startswith(os.path.normpath(k)) for k in kept), (path, kept)


def test_a_renamed_option_or_command_would_fail_this_check() -> None:
    with pytest.raises(click.NoSuchOption):
        parse(["gate", str(GATE_FILE), "--output", "reports/gate"])
    with pytest.raises(click.UsageError):
        parse(["gates", str(GATE_FILE)])
    with pytest.raises(click.BadParameter):
        parse(["images", "ensure", "--kafka-version", "2.8.0"])
