"""Every ``chaos`` subcommand answers --help; harness errors exit 2 with their fix, not a traceback."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from chaos.cli import cli


def _command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            paths += _command_paths(command, (*prefix, name))
        else:
            paths.append((*prefix, name))
    return paths


@pytest.mark.parametrize("path", _command_paths(cli), ids=lambda p: " ".join(p) or "chaos")
def test_every_subcommand_has_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Usage: ")
    # a command's help carries its docstring's first line
    assert len(result.output.splitlines()) > 3


def test_expected_commands_exist() -> None:
    names = {" ".join(p) for p in _command_paths(cli)}
    assert {"images list", "images build", "images ensure", "jars ensure", "doctor", "clean"} <= names


def test_bad_image_source_is_a_usage_error_with_choices() -> None:
    result = CliRunner().invoke(cli, ["images", "ensure", "--source", "registry"])
    assert result.exit_code == 2
    assert "'official', 'local', 'auto'" in result.output


def test_harness_errors_exit_2_with_the_fix() -> None:
    env_script = "import os; os.environ['CHAOS_IMAGES']='nonsense'; from chaos.cli import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", env_script, "doctor"], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "is not one of official, local, auto" in proc.stderr
    assert "CHAOS_IMAGES" in proc.stderr
