"""Imports go one way down the pipeline: cluster → faults → workload → history → audit → gate → report.

A stage may import the stages before it, :mod:`chaos.run` and the leaf modules, never a later stage; the
composing packages (``chaos.scenario``, then the gate's driver that replays scenarios, then the CLI, the
doctor and the pytest plugin) sit on top. Every
import counts — inside functions and ``TYPE_CHECKING`` blocks too — since a lazy import is still a
dependency. The modules are parsed with :mod:`ast`, nothing is imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import chaos

PACKAGE_DIR: Final = Path(chaos.__file__).parent
LEAVES: Final = ("chaos", "chaos.errors", "chaos.paths", "chaos.versions", "chaos.maven", "chaos.progress")
PIPELINE: Final = ("cluster", "faults", "workload", "history", "audit", "gate", "report")
STAGE_PACKAGES: Final = {"workload": ("chaos.service",)}
"""Packages that belong to a stage without its name: a team's service is run like the workload."""
LAYERS: Final[tuple[tuple[str, ...], ...]] = (
    LEAVES,
    ("chaos.run",),
    *((f"chaos.{stage}", *STAGE_PACKAGES.get(stage, ())) for stage in PIPELINE),
    ("chaos.scenario",),
    ("chaos.gate.driver",),
    ("chaos.cli", "chaos.doctor", "chaos.plugin"),
)
"""Bottom to top; a module may import its own layer and the ones below."""


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int

    def __str__(self) -> str:
        return (
            f"{self.source} -> {self.target} (line {self.line}): "
            f"{layer_name(self.source)} may not import {layer_name(self.target)}"
        )


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of the ``chaos`` package (image build contexts hold no Python of ours)."""
    return {
        module_name(p): p
        for p in sorted(PACKAGE_DIR.rglob("*.py"))
        if "context" not in p.relative_to(PACKAGE_DIR).parts
    }


def layer(module: str) -> int:
    """The index of ``module``'s layer: a module belongs to the longest prefix listed in :data:`LAYERS`."""
    best, index = "", -1
    for i, names in enumerate(LAYERS):
        for name in names:
            matches = module == name or module.startswith(name + ".")
            if matches and name != "chaos" and len(name) > len(best):
                best, index = name, i
    if index < 0 and module == "chaos":
        return 0
    if index < 0:
        raise AssertionError(
            f"{module} belongs to no layer: add it to LEAVES or LAYERS in {Path(__file__).name} "
            f"(a new stage goes in PIPELINE in pipeline order)"
        )
    return index


def layer_name(module: str) -> str:
    names = LAYERS[layer(module)]
    return "a leaf module" if names == LEAVES else " / ".join(names)


def imports(module: str, path: Path, known: set[str]) -> Iterator[Edge]:
    """Every ``chaos`` module ``module`` imports, wherever the import statement is."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            # ``from chaos.cluster import wire`` imports the module chaos.cluster.wire
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names
            ]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            targets = [node.args[0].value]
        else:
            continue
        for target in targets:
            if target == "chaos" or target.startswith("chaos."):
                yield Edge(module, target, node.lineno)


def all_edges() -> list[Edge]:
    found = modules()
    known = set(found)
    edges = (edge for module, path in found.items() for edge in imports(module, path, known))
    return list(dict.fromkeys(edges))  # one edge per import statement, not per imported name


def test_the_graph_is_parsed() -> None:
    found = modules()
    assert {
        "chaos.run.terms",
        "chaos.cluster.cluster",
        "chaos.report.render",
        "chaos.plugin.fixtures",
    } <= set(found)
    edges = {(e.source, e.target) for e in all_edges()}
    assert ("chaos.audit.verdict", "chaos.audit.facts") in edges  # a module-level import
    assert ("chaos.cluster.config", "chaos.versions") in edges  # ``from chaos import versions``
    assert ("chaos.plugin.lifecycle", "chaos.report.hook") in edges  # inside a function


def test_no_import_goes_up_the_pipeline() -> None:
    upward = [e for e in all_edges() if layer(e.target) > layer(e.source)]
    assert not upward, "imports that go up the pipeline:\n" + "\n".join(f"  {e}" for e in upward)


def test_scenario_needs_nothing_from_the_report() -> None:
    """A scenario writes the run's manifest (``chaos.run.manifest``); the report only reads the run."""
    edges = [
        e
        for e in all_edges()
        if layer(e.source) == layer("chaos.scenario") and layer(e.target) == layer("chaos.report")
    ]
    assert not edges, "chaos.scenario imports the report:\n" + "\n".join(f"  {e}" for e in edges)


def test_the_history_records_any_workload_without_importing_one() -> None:
    """The history stores events (:mod:`chaos.run.events`); a child that runs a workload and records it is
    a composition (``chaos.scenario.record_workload``), so the history never depends on the workload."""
    edges = [
        e
        for e in all_edges()
        if e.source.startswith("chaos.history") and e.target.startswith(("chaos.workload", "chaos.service"))
    ]
    assert not edges, "chaos.history imports the workload:\n" + "\n".join(f"  {e}" for e in edges)


def find_cycle(edges: list[Edge]) -> list[str]:
    """One import cycle among ``edges`` (``[a, b, …, a]``), or ``[]`` when the graph has none."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if e.source != e.target:
            graph.setdefault(e.source, set()).add(e.target)
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str]:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return []
        path.append(module)
        for target in sorted(graph.get(module, ())):
            cycle = visit(target)
            if cycle:
                return cycle
        path.pop()
        done.add(module)
        return []

    for module in sorted(graph):
        cycle = visit(module)
        if cycle:
            return cycle
    return []


def test_no_two_modules_import_each_other() -> None:
    """No cycle, even through ``TYPE_CHECKING`` (e.g. the cluster and its introspection: both use
    :mod:`chaos.cluster.broker` and the introspection reads the cluster through a protocol)."""
    assert find_cycle([Edge("a", "b", 1), Edge("b", "c", 1), Edge("c", "a", 1)]) == ["a", "b", "c", "a"]
    cycle = find_cycle(all_edges())
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_layers_classify_every_module() -> None:
    for module in modules():
        layer(module)  # raises, naming the module, when a new package has no place in the pipeline
