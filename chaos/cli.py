"""The ``chaos`` command line."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from chaos import versions
from chaos.errors import AuditError, ChaosError
from chaos.progress import say as _say
from chaos.run.terms import VERDICT_EXIT

console = Console(soft_wrap=True)  # paths printed whole, never broken across lines

_SOURCE_OPTION = click.option(
    "--source",
    "source",
    type=click.Choice(["official", "local", "auto"]),
    default=None,
    help="Where images come from (default: $CHAOS_IMAGES, else auto).",
)


_KAFKA_VERSION_OPTION = click.option(
    "--kafka-version",
    "kafka_version",
    type=click.Choice(versions.SUPPORTED_KAFKA_VERSIONS),
    default=None,
    help=f"Kafka version (default: ${versions.KAFKA_VERSION_ENV}, else {versions.KAFKA_VERSION}).",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="chaos-harness")
def cli() -> None:
    """Fault-injection chaos harness for Apache Kafka."""


@cli.group()
def images() -> None:
    """List, build or make present the container images."""


@images.command("list")
@_KAFKA_VERSION_OPTION
def images_list(kafka_version: str | None) -> None:
    """Show every image: its official reference, local tag, and what is present."""
    from chaos.cluster.images import image_status

    table = Table()
    for header in ("image", "official", "present", "local tag", "local build"):
        table.add_column(header, overflow="fold")
    for row in image_status(versions.chosen_kafka_version(kafka_version)):
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
@_KAFKA_VERSION_OPTION
def images_build(force: bool, names: tuple[str, ...], kafka_version: str | None) -> None:
    """Build local images (all by default), reusing current builds unless --force."""
    from chaos.cluster.images.local import ensure_local, recipes

    version = versions.chosen_kafka_version(kafka_version)
    for name in names or tuple(recipes(version)):
        console.print(f"{name}: {ensure_local(name, force=force, kafka_version=version)}")


@images.command("ensure")
@_SOURCE_OPTION
@_KAFKA_VERSION_OPTION
def images_ensure(source: str | None, kafka_version: str | None) -> None:
    """Pull or build whatever is missing for the chosen source; fast when nothing changed."""
    from chaos.cluster.images import ensure_images

    started = time.monotonic()
    chosen = ensure_images(source, kafka_version=versions.chosen_kafka_version(kafka_version))
    for role, src in chosen.sources:
        console.print(f"{role.value:10} {chosen.ref(role)}  [dim]({src.value})[/dim]")
    console.print(f"[dim]images ready in {time.monotonic() - started:.1f} s[/dim]")


@cli.group()
def spark() -> None:
    """A warm Spark Connect server on 127.0.0.1 that audits share while it is up."""


@spark.command("start")
@click.option(
    "--master",
    default="local[2]",
    show_default=True,
    help="Where its jobs run: local[N] (N task slots in its JVM) or a cluster's master (spark://HOST:PORT).",
)
@click.option("--memory", default="2g", show_default=True, help="Its driver's JVM heap.")
@click.option(
    "--idle",
    default="30m",
    show_default=True,
    help="Stop after this long without a connected client: 90s, 30m, 2h.",
)
def spark_start(master: str, memory: str, idle: str) -> None:
    """Start the warm server (or keep the running one): while it is up, `chaos run`, `chaos audit`,
    `chaos gate` and pytest sessions audit on it unless given a Spark master (or $CHAOS_SPARK_MASTER,
    or CHAOS_SPARK_SERVER=off)."""
    from chaos.audit.warm import start

    server = start(master=master, memory=memory, idle_timeout_s=_seconds(idle, "--idle"))
    _say(f"warm Spark server at {server.url} (supervisor pid {server.pid}, jobs on {server.master}, "
         f"stops after {server.idle_timeout_s:.0f} s without a client)")  # fmt: skip


@spark.command("status")
def spark_status() -> None:
    """Say whether the warm server is up, and how it is doing."""
    from chaos.audit.warm import clients, running

    server = running()
    if server is None:
        _say("no warm Spark server: `chaos spark start` starts one")
        return
    _say(f"warm Spark server at {server.url}: supervisor pid {server.pid}, jobs on {server.master}, "
         f"{server.memory} heap, up {time.time() - server.started:.0f} s, {clients(server.port)} clients "
         f"connected, stops after {server.idle_timeout_s:.0f} s without one; log {server.log}")  # fmt: skip


@spark.command("stop")
def spark_stop() -> None:
    """Stop the warm server (a stale record of one is removed)."""
    from chaos.audit.warm import stop

    _say("warm Spark server stopped" if stop() else "no warm Spark server was running")


@cli.group()
def jars() -> None:
    """Spark's Kafka connector jars and the Java client worker."""


@jars.command("ensure")
@_KAFKA_VERSION_OPTION
def jars_ensure(kafka_version: str | None) -> None:
    """Fetch spark-sql-kafka-0-10 for the installed PySpark with Maven, build the Java client worker
    against kafka-clients of the Kafka version, and build the Spark driver's class archive (a local
    session's JVM starts sooner with it), unless cached. A class archive that cannot be built is reported
    and left out: Spark runs without it."""
    from chaos.audit.archive_build import ensure_class_archive
    from chaos.audit.connector import ensure_connector_jars
    from chaos.workload.java_build import ensure_java_worker

    for jar in ensure_connector_jars():
        console.print(str(jar), soft_wrap=True)
    worker = ensure_java_worker(versions.chosen_kafka_version(kafka_version))
    console.print(str(worker.directory), soft_wrap=True)
    building = "building the Spark class archive (once per JDK and set of jar files; about 80 s)"
    try:
        archive = ensure_class_archive(on_build=lambda: click.echo(building, err=True))
    except AuditError as exc:
        click.echo(f"warning: {exc}", err=True)
    else:
        if archive is not None:
            console.print(str(archive), soft_wrap=True)


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
@click.option(
    "--run-id",
    "run_ids",
    multiple=True,
    help="Remove this run's resources, even while its session runs (repeatable).",
)
@click.option("--all", "everything", is_flag=True, help="Remove every run's resources, live runs included.")
def clean(run_ids: tuple[str, ...], everything: bool) -> None:
    """Remove containers and networks labelled chaos-harness of runs that ended or died (their reaper is
    gone). Live runs are left alone and listed, unless named with --run-id or with --all."""
    from chaos.audit.warm import forget_stale
    from chaos.cluster.sweep import sweep

    if run_ids and everything:
        raise click.UsageError("give --run-id or --all, not both")
    results = [sweep(run_id) for run_id in run_ids] if run_ids else [sweep(everything=everything)]
    containers = [name for result in results for name in result.containers]
    networks = [name for result in results for name in result.networks]
    _say(f"removed {len(containers)} containers, {len(networks)} networks")
    for name in (*containers, *networks):
        _say(f"  {name}")
    volumes = [name for result in results for name in result.volumes]
    if volumes:
        _say(f"removed {len(volumes)} brokers' log directory volumes: {', '.join(volumes)}")
    if forget_stale():
        _say("removed the record of a warm Spark server that is gone")
    live = [run for result in results for run in result.live_runs]
    if live:
        _say(f"left {len(live)} live runs alone (their reaper runs: a session is using them):")
        for run in live:
            _say(f"  {run.run_id}: {run.containers} containers, {run.networks} networks")
        _say("  to remove them anyway (their sessions then fail): `chaos clean --run-id ID` or `--all`")


def _streams(values: tuple[str, ...]) -> dict[str, str]:
    """``--stream`` values as producer -> guarantee; a malformed one is a usage error (exit 2)."""
    from chaos.run.terms import GUARANTEES

    streams: dict[str, str] = {}
    for value in values:
        name, _, claimed = value.partition("=")
        if not name or claimed not in GUARANTEES:
            raise click.BadParameter(
                f"{value!r}: expected PRODUCER=GUARANTEE, GUARANTEE one of {', '.join(GUARANTEES)} "
                "(e.g. --stream producer-1=at_least_once)",
                param_hint="--stream",
            )
        streams[name] = claimed
    return streams


@cli.command()
@click.argument("run_dir")
@click.option(
    "--spark-master",
    default=None,
    help="Spark master URL: local[N], spark://HOST:PORT, … or sc://HOST:PORT (a Spark Connect server); "
    "default the warm server when `chaos spark start` runs one, else local[*].",
)
@click.option("--engine", type=click.Choice(["spark", "reference"]), default="spark", show_default=True)
@click.option(
    "--guarantee",
    type=click.Choice(["at_most_once", "at_least_once", "idempotent", "exactly_once"]),
    default="at_least_once",
    show_default=True,
    help="The guarantee the client profile claims.",
)
@click.option(
    "--stream",
    "streams",
    multiple=True,
    metavar="PRODUCER=GUARANTEE",
    callback=lambda ctx, param, value: _streams(value),
    help="Judge PRODUCER's values by GUARANTEE instead of --guarantee (repeatable; a run's audit.json "
    "lists the streams its scenario declared).",
)
@click.option("--bootstrap", default=None, help="Read the topic through Kafka (default: the drain's reads).")
@click.option("--topic", "topics", multiple=True, help="Topic to read with --bootstrap (repeatable).")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write audit.json here (default: RUN_DIR/audit.json; needed when RUN_DIR is a URI).",
)
def audit(
    run_dir: str,
    spark_master: str | None,
    engine: str,
    guarantee: str,
    streams: dict[str, str],
    bootstrap: str | None,
    topics: tuple[str, ...],
    out: Path | None,
) -> None:
    """Audit a saved run, write RUN_DIR/audit.json; exit 0 pass, 1 fail, 3 unknown, 2 bad input.

    RUN_DIR is a local run directory, or a URI Spark's file systems read (file://, hdfs://, s3a://… as
    your Spark has connectors for; Spark engine only, and audit.json goes to --out)."""
    from chaos.audit.auditfile import audit_path, write_audit
    from chaos.audit.run import TopicSource, audit_run, is_uri
    from chaos.run.files import RunFileError

    if is_uri(run_dir):
        if engine != "spark":
            raise click.BadParameter(
                f"{run_dir} is a URI, which only the Spark engine reads: --engine spark, or copy the run "
                "here and audit the copy",
                param_hint="RUN_DIR",
            )
        if out is None:
            raise click.BadParameter(
                f"{run_dir} is a URI and audit.json is written locally: say where with --out FILE",
                param_hint="--out",
            )
    else:
        _check_auditable(Path(run_dir), writes=out is None)
    target = out if out is not None else audit_path(run_dir)
    topic = TopicSource(bootstrap, topics) if bootstrap else None
    result = audit_run(
        run_dir,
        guarantee=guarantee,
        engine=engine,  # type: ignore[arg-type]  # click.Choice guarantees the literal
        master=spark_master or _default_master(engine),
        topic=topic,
        write=False,
        streams=streams,
    )
    try:
        write_audit(run_dir, result, path=target)
    except OSError as exc:
        raise RunFileError(
            f"cannot write {target}: {exc.strerror or exc}; free space or make {target.parent} "
            "writable, then run `chaos audit` again"
        ) from None
    colour = {"pass": "green", "fail": "red", "unknown": "yellow"}[result.verdict]
    console.print(f"[{colour}]{result.verdict}[/{colour}] ({guarantee}, {engine}): {target}")
    for name, count in result.facts.counts().items():
        if count:
            mark = "fails" if name in result.failed_by else "expected"
            console.print(f"  {name}: {count} ({mark})")
    for problem in result.facts.problems:
        console.print(f"  [yellow]unknown:[/yellow] {problem}", highlight=False)
    if result.verdict != "pass":
        sys.exit(VERDICT_EXIT[result.verdict])


def _check_auditable(path: Path, *, writes: bool = True) -> None:
    """Refuse (exit 2, nothing written) a directory that is not one run's, or (``writes``) that
    ``audit.json`` cannot be written to — before an audit that may take minutes."""
    import tempfile

    from chaos.report.render import find_runs, is_run_dir

    if not path.is_dir():
        raise click.BadParameter(f"{path} is not a directory", param_hint="RUN_DIR")
    if not is_run_dir(path):
        runs = find_runs(path)
        hint = (
            f"it holds {len(runs)} run(s): audit one, e.g. `chaos audit {shlex.quote(str(runs[0]))}`"
            if runs
            else "give the directory of one run: reports/tests/<test>/, which holds its history/"
        )
        raise click.BadParameter(
            f"{path} is not a run directory (no history/, scenario.json or audit.json); {hint}",
            param_hint="RUN_DIR",
        )
    if not writes:
        return
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise click.BadParameter(
            f"{path} is not writable ({exc.strerror or exc}) and `chaos audit` writes audit.json into it; "
            "make it writable, write it elsewhere with --out FILE, or audit a copy: "
            f"cp -r {shlex.quote(str(path))} /tmp/run && chaos audit /tmp/run",
            param_hint="RUN_DIR",
        ) from None


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
            f"[dim]({page.bytes / 1e3:.0f} kB, {page.seconds:.2f} s)[/dim]",
            highlight=False,
        )
        for missing in page.summary.missing:
            console.print(f"         [yellow]missing:[/yellow] {missing}", highlight=False)
    if index is not None:
        console.print(f"index: {index}", highlight=False)


@cli.command()
@click.argument("columns", nargs=-1, required=True, metavar="LABEL=REPORT_DIR...")
def matrix(columns: tuple[str, ...]) -> None:
    """Print a Markdown table comparing report trees (e.g. one `make chaos` per Kafka version): a row per
    case variant, a column per LABEL, each cell the verdict, lost acks, duplicates and longest outage."""
    from chaos.report.matrix import matrix_markdown, parse_columns

    click.echo(matrix_markdown(parse_columns(columns)), nl=False)


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
@_KAFKA_VERSION_OPTION
@click.option(
    "--group-protocol",
    type=click.Choice(["classic", "consumer"]),
    default=None,
    help="The group members' protocol (default: $CHAOS_GROUP_PROTOCOL, else classic; consumer: Kafka 4+).",
)
@click.option(
    "--audit-engine",
    type=click.Choice(["spark", "reference"]),
    default=None,
    help="Which engine audits the run (default: $CHAOS_AUDIT_ENGINE, else spark).",
)
@click.option(
    "--client",
    type=click.Choice(["librdkafka", "java"]),
    default=None,
    help="The producers' and members' client (default: $CHAOS_CLIENT, else librdkafka; java: kafka-clients).",
)
@click.option(
    "--duration",
    default=None,
    help="How long a scenario without a fixed length runs (RANDOM: its fault plan): 60, 90s, 5m.",
)
@click.option(
    "--fault-kinds",
    default=None,
    help="The kinds a random plan draws from (RANDOM): default, all (broker clock and disk faults too) or "
    "kinds separated by commas.",
)
def scenario_run(
    scenario_id: str,
    seed: int | None,
    profile: str,
    variant: str | None,
    kafka_version: str | None,
    group_protocol: str | None,
    audit_engine: str | None,
    client: str | None,
    duration: str | None,
    fault_kinds: str | None,
) -> None:
    """Run one catalog scenario (by id or catalog id, e.g. PB1) through pytest.

    Exit 0 passed, 1 a test failed, 2 bad input (pytest's usage error 4 included), 130 interrupted (Ctrl-C
    or SIGTERM), as every harness command. Artifacts go to $CHAOS_REPORT_DIR, else ./reports under the
    current directory."""
    from chaos.scenario import find, pytest_args

    if duration is not None:
        _seconds(duration, "--duration")
    if fault_kinds is not None:
        from chaos.faults.plan import parse_kinds

        try:
            parse_kinds(fault_kinds)
        except ChaosError as exc:
            raise click.BadParameter(str(exc), param_hint="--fault-kinds") from None
    extra: tuple[str, ...] = ("--kafka-version", kafka_version) if kafka_version else ()
    extra += ("--chaos-group-protocol", group_protocol) if group_protocol else ()
    extra += ("--chaos-audit-engine", audit_engine) if audit_engine else ()
    extra += ("--chaos-client", client) if client else ()
    extra += ("--chaos-duration", duration) if duration else ()
    extra += ("--chaos-fault-kinds", fault_kinds) if fault_kinds else ()
    _run_pytest(pytest_args(find(scenario_id), seed=seed, profile=profile, variant=variant, extra=extra))


@cli.command("replay")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--audit-engine",
    type=click.Choice(["spark", "reference"]),
    default=None,
    help="Which engine audits the replay (default: $CHAOS_AUDIT_ENGINE, else spark).",
)
@click.option("--out", default=None, help="The replay's report directory (default RUN_DIR/replay).")
def replay(run_dir: str, audit_engine: str | None, out: str | None) -> None:
    """Run a saved run's fault plan again: same scenario, variant, seed, time profile and Kafka version,
    the faults of RUN_DIR/plan.resolved.json at the same times on the same brokers. The replay's run goes
    to its own report directory (RUN_DIR/replay: the original run is kept); exit codes as `chaos run`."""
    from chaos.scenario.replay import replay_of

    again = replay_of(Path(run_dir), Path(out) if out else None)
    console.print(
        f"replaying {again.scenario.case_id} [{again.variant}], seed {again.seed}: "
        f"{len(again.plan.steps)} faults over {again.plan.workload_s:.0f} s from {again.plan_file}",
        highlight=False,
    )
    extra: tuple[str, ...] = ("--chaos-audit-engine", audit_engine) if audit_engine else ()
    _run_pytest(again.pytest_args(extra))


@cli.command("shrink")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--max-tries", type=click.IntRange(1, 500), default=20, show_default=True)
@click.option("--max-time", default="4h", show_default=True, help="Time budget: 90m, 2h, 3600.")
@click.option(
    "--out", default=None, help="Where the tries, plan.shrunk.json and shrink.json go (RUN_DIR/shrink)."
)
def shrink(run_dir: str, max_tries: int, max_time: str, out: str | None) -> None:
    """Search for the smallest fault plan that still makes a failing run fail: smaller plans (faults dropped,
    windows halved), each replayed as a new run, within --max-tries and --max-time; the run's own plan is
    replayed only when nothing smaller failed.
    Exit 1: the failure reproduced (the smallest failing plan in OUT/plan.shrunk.json); 3: it did not come
    back; 2: RUN_DIR did not fail, or ran no plan."""
    from chaos.scenario.shrink import SHRINK_LOG_FILE, SHRUNK_PLAN_FILE, shrink_run

    budget_s = _seconds(max_time, "--max-time")
    result = shrink_run(Path(run_dir), Path(out) if out else None, max_tries=max_tries, max_seconds=budget_s)
    for attempt in result.attempts:
        _say(
            f"try {attempt.number}: {attempt.verdict} ({attempt.steps} faults, {attempt.seconds:.0f} s): "
            f"{attempt.change}"
        )
    spent = f"{len(result.attempts)} tries, {sum(a.seconds for a in result.attempts):.0f} s; {result.stopped}"
    if result.smallest is None:
        _say(f"inconclusive: {spent}", "yellow")
        sys.exit(VERDICT_EXIT["unknown"])
    _say(
        f"smallest failing plan: {len(result.smallest.steps)} of {len(result.plan.steps)} faults "
        f"({spent}): {result.out / SHRUNK_PLAN_FILE}; every try in {result.out / SHRINK_LOG_FILE}",
        "red",
    )
    sys.exit(VERDICT_EXIT["fail"])


def _default_master(engine: str) -> str:
    """Where `chaos audit` runs Spark when no master is given: the warm server when it is up."""
    from chaos.audit.spark import DEFAULT_MASTER

    if engine != "spark":
        return DEFAULT_MASTER
    from chaos.audit.warm import master_or

    return master_or(DEFAULT_MASTER)


def _seconds(text: str, option: str) -> float:
    """A duration option's seconds (60, 90s, 5m); a usage error naming the option otherwise."""
    from chaos.run.durations import parse_duration

    try:
        return parse_duration(text)
    except ChaosError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


def _run_pytest(args: list[str]) -> None:
    """Run pytest with ``args`` and exit with the harness's codes (see `chaos run`)."""
    import pytest
    from rich.markup import escape

    # escaped: a node id's [variant] is not rich markup
    console.print(f"[dim]pytest {escape(shlex.join(args))}[/dim]", highlight=False)
    status = int(pytest.main(args))
    if status == pytest.ExitCode.INTERRUPTED:
        sys.exit(130)
    sys.exit(2 if status in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR) else status)


@cli.command("gate")
@click.argument("gate_file", type=click.Path(dir_okay=False))
@click.option(
    "--check-only",
    is_flag=True,
    help="Only lint the configuration, before any container starts: exit 0 the claim is kept, 1 it is not, "
    "2 bad input.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Output directory: gate.json, gate.md, junit.xml, the runs and their HTML index "
    "(default: $CHAOS_REPORT_DIR/gate, else ./reports/gate).",
)
@click.option(
    "--junit", type=click.Path(dir_okay=False), default=None, help="JUnit XML path (default: OUT/junit.xml)."
)
@click.option(
    "--calibrate", is_flag=True, help="Also run each case's built-in vulnerable and remediated variants."
)
@click.option(
    "--allow-flaky", is_flag=True, help="A flaky case (failed, then passed on a retry) does not fail."
)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="OLD_GATE_JSON",
    help="A previous gate run's gate.json: a case whose outage, p99 ack latency under fault or recovery "
    "times got worse beyond the gate file's [baseline] tolerance fails (exit 1).",
)
@click.option(
    "--cases",
    default=None,
    metavar="CASES",
    help="Run these catalog cases (comma-separated, e.g. L2,L6) instead of the gate file's cases or the "
    "default set; the cases the lint names that are left out are listed as not run.",
)
@click.option(
    "--lint-advisory",
    is_flag=True,
    help="The lint informs, the cases alone decide (by default a claim the lint proves broken fails the "
    "full run, exit 1, even when every case passed).",
)
@click.option("--seed", type=int, default=None, help="Seed of the runs (default: $CHAOS_SEED, else random).")
def gate_command(
    gate_file: str,
    check_only: bool,
    out: str | None,
    junit: str | None,
    calibrate: bool,
    allow_flaky: bool,
    baseline: str | None,
    cases: str | None,
    lint_advisory: bool,
    seed: int | None,
) -> None:
    """Judge your own client and broker configuration (GATE_FILE, TOML: docs/gate.md) against the
    guarantee it claims: the lint, then each selected catalog case on a real cluster with your settings.
    Exit 0 passed, 1 failed (or flaky, or the lint proves the claim broken), 2 harness error or bad input,
    3 inconclusive; --check-only: the lint's 0 kept, 1 not kept, 2 bad input, writing nothing."""
    from chaos.gate.cases import split_cases
    from chaos.gate.driver.command import GateOptions, check_gate, run_gate

    options = GateOptions(
        gate_file,
        out,
        junit,
        calibrate=calibrate,
        allow_flaky=allow_flaky,
        seed=seed,
        baseline=baseline,
        cases=split_cases(cases) if cases is not None else None,
        lint_advisory=lint_advisory,
    )
    try:
        exit_code = check_gate(options, full=not check_only)
        if not check_only:
            exit_code = run_gate(options)
    except ChaosError as exc:
        _say(
            f"error: {gate_file}: the gate cannot run (exit 2; nothing was judged, this is not a verdict):",
            "red",
        )
        for line in str(exc).splitlines():
            _say(f"  {line}")
        sys.exit(2)
    except Exception as exc:  # a bug must still exit 2 ("bad input/harness error"), never look like a verdict
        _say(f"error: the gate failed unexpectedly ({type(exc).__name__}: {exc}); exit 2", "red")
        sys.exit(2)
    sys.exit(exit_code)


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
