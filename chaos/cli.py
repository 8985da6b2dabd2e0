"""The ``chaos`` command line."""

from __future__ import annotations

import sys
import time

import click
from rich.console import Console
from rich.table import Table

from chaos.errors import ChaosError

console = Console()

_SOURCE_OPTION = click.option(
    "--source",
    "source",
    type=click.Choice(["official", "local", "auto"]),
    default=None,
    help="Where images come from (default: $CHAOS_IMAGES, else auto).",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="chaos-harness")
def cli() -> None:
    """Fault-injection chaos harness for Apache Kafka."""


@cli.group()
def images() -> None:
    """List, build or make present the container images."""


@images.command("list")
def images_list() -> None:
    """Show every image: its official reference, local tag, and what is present."""
    from chaos.cluster.images import image_status

    table = Table()
    for header in ("image", "official", "present", "local tag", "local build"):
        table.add_column(header, overflow="fold")
    for row in image_status():
        table.add_row(
            row.name,
            row.official or "-",
            "yes" if row.official_present else "no",
            row.local_tag,
            row.local_state,
        )
    console.print(table)


@images.command("build")
@click.option("--force", is_flag=True, help="Rebuild even when the current build is present.")
@click.argument("names", nargs=-1, type=click.Choice(["jre-base", "kafka", "toxiproxy", "reaper"]))
def images_build(force: bool, names: tuple[str, ...]) -> None:
    """Build local images (all by default), reusing current builds unless --force."""
    from chaos.cluster.images.local import ensure_local, recipes

    for name in names or tuple(recipes()):
        console.print(f"{name}: {ensure_local(name, force=force)}")


@images.command("ensure")
@_SOURCE_OPTION
def images_ensure(source: str | None) -> None:
    """Pull or build whatever is missing for the chosen source; fast when nothing changed."""
    from chaos.cluster.images import ensure_images

    started = time.monotonic()
    chosen = ensure_images(source)
    for role, src in chosen.sources:
        console.print(f"{role.value:10} {chosen.ref(role)}  [dim]({src.value})[/dim]")
    console.print(f"[dim]images ready in {time.monotonic() - started:.1f} s[/dim]")


@cli.group()
def jars() -> None:
    """Spark's Kafka connector jars."""


@jars.command("ensure")
def jars_ensure() -> None:
    """Fetch spark-sql-kafka-0-10 for the installed PySpark with Maven, unless cached."""
    from chaos.audit.connector import ensure_connector_jars

    for jar in ensure_connector_jars():
        console.print(str(jar), soft_wrap=True)


@jars.command("list")
def jars_list() -> None:
    """Show the cached connector jars for the installed PySpark."""
    from chaos.audit.connector import connector_jars, jars_dir

    found = connector_jars()
    if not found:
        raise click.ClickException(f"no jars in {jars_dir()}; run `chaos jars ensure`")
    for jar in found:
        console.print(str(jar), soft_wrap=True)


@cli.command()
@_SOURCE_OPTION
def doctor(source: str | None) -> None:
    """Check every precondition; exit 0 only when all pass, and print the fix for each failure."""
    from chaos.doctor import run_checks

    checks = run_checks(source)
    for check in checks:
        mark = "[green]ok  [/green]" if check.ok else "[red]FAIL[/red]"
        console.print(f"{mark} {check.name}: {check.detail}", highlight=False)
        if not check.ok:
            console.print(f"     fix: {check.fix}", highlight=False)
    if not all(c.ok for c in checks):
        sys.exit(1)


@cli.command()
@click.option("--run-id", default=None, help="Only this run's resources (default: every run's).")
def clean(run_id: str | None) -> None:
    """Remove containers and networks labelled chaos-harness that earlier runs left behind."""
    from chaos.cluster.sweep import sweep

    result = sweep(run_id)
    console.print(f"removed {len(result.containers)} containers, {len(result.networks)} networks")
    for name in (*result.containers, *result.networks):
        console.print(f"  {name}")


@cli.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--spark-master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option("--engine", type=click.Choice(["spark", "reference"]), default="spark", show_default=True)
@click.option(
    "--guarantee",
    type=click.Choice(["at_most_once", "at_least_once", "idempotent", "exactly_once"]),
    default="at_least_once",
    show_default=True,
    help="The guarantee the client profile claims.",
)
@click.option("--bootstrap", default=None, help="Read the topic through Kafka (default: the drain's reads).")
@click.option("--topic", "topics", multiple=True, help="Topic to read with --bootstrap (repeatable).")
def audit(
    run_dir: str,
    spark_master: str,
    engine: str,
    guarantee: str,
    bootstrap: str | None,
    topics: tuple[str, ...],
) -> None:
    """Audit a saved run, write RUN_DIR/audit.json; exit 0 pass, 1 fail, 3 unknown."""
    from chaos.audit.run import TopicSource
    from chaos.gate.auditfile import audit_path
    from chaos.gate.run import audit_run

    topic = TopicSource(bootstrap, topics) if bootstrap else None
    result = audit_run(
        run_dir,
        guarantee=guarantee,
        engine=engine,  # type: ignore[arg-type]  # click.Choice guarantees the literal
        master=spark_master,
        topic=topic,
    )
    colour = {"pass": "green", "fail": "red", "unknown": "yellow"}[result.verdict]
    console.print(f"[{colour}]{result.verdict}[/{colour}] ({guarantee}, {engine}): {audit_path(run_dir)}")
    for name, count in result.facts.counts().items():
        if count:
            mark = "fails" if name in result.failed_by else "expected"
            console.print(f"  {name}: {count} ({mark})")
    for problem in result.facts.problems:
        console.print(f"  [yellow]unknown:[/yellow] {problem}", highlight=False)
    if result.verdict != "pass":
        sys.exit(1 if result.verdict == "fail" else 3)


@cli.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
def report(run_dir: str) -> None:
    """Write RUN_DIR/report.html; for a directory of runs, every run's page and an index.html."""
    from chaos.report import render_tree

    rendered, index = render_tree(run_dir)
    colours = {"pass": "green", "fail": "red", "unknown": "yellow"}
    for page in rendered:
        colour = colours.get(page.summary.verdict, "yellow")
        console.print(
            f"[{colour}]{page.summary.verdict:7}[/{colour}] {page.page}  "
            f"[dim]({page.bytes / 1e6:.1f} MB, {page.seconds:.2f} s)[/dim]",
            highlight=False,
        )
        for missing in page.summary.missing:
            console.print(f"         [yellow]missing:[/yellow] {missing}", highlight=False)
    if index is not None:
        console.print(f"index: {index}", highlight=False)


@cli.command("list")
def scenarios_list() -> None:
    """List the built-in catalog's scenarios with their catalog ids and variants."""
    from chaos.scenario import discover, scenarios_dir

    table = Table()
    for header in ("case", "scenario id", "variants", "title"):
        table.add_column(header, overflow="fold")
    for scenario in discover():
        table.add_row(
            scenario.case_id, scenario.scenario_id, ", ".join(scenario.variant_names), scenario.title
        )
    console.print(table)
    console.print(f"[dim]from {scenarios_dir()}[/dim]", highlight=False, soft_wrap=True)


@cli.command("run")
@click.argument("scenario_id")
@click.option("--seed", type=int, default=None, help="Seed of the run (default: $CHAOS_SEED, else random).")
@click.option(
    "--profile",
    type=click.Choice(["ci", "faithful"]),
    default="ci",
    show_default=True,
    help="Time profile: ci scales timeouts down, faithful keeps Kafka's defaults.",
)
@click.option("--variant", default=None, help="Run one variant only (default: all of them).")
def scenario_run(scenario_id: str, seed: int | None, profile: str, variant: str | None) -> None:
    """Run one catalog scenario (by id or catalog id, e.g. PB1) through pytest; exit with pytest's status.

    Artifacts go to $CHAOS_REPORT_DIR, else ./reports under the current directory."""
    import shlex

    import pytest

    from chaos.scenario import find, pytest_args

    args = pytest_args(find(scenario_id), seed=seed, profile=profile, variant=variant)
    console.print(f"[dim]pytest {shlex.join(args)}[/dim]", highlight=False)
    sys.exit(int(pytest.main(args)))


def main() -> None:
    """Entry point: harness errors print their fix and exit 2 instead of a traceback."""
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except ChaosError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}", highlight=False)
        sys.exit(2)
