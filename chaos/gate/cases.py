"""Which catalog cases a full gate run replays: the gate file's ``cases``, else the default set.

The default set is one case per failure family, chosen so a warm gate run fits in about 8 minutes on a
2-core machine (docs/gate.md, "The default case set"); ``cases = [...]`` in the gate file (or ``--cases``)
picks any others. :func:`plan_cases` widens the default set by the cases the lint names for a rule that
breaks the claim, and lists them as not run when an explicit set leaves them out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Final, Protocol

from chaos.gate.gatefile import CASE_NEEDS, GateFile, GateFileError, applies, resolve_cases


class LintResult(Protocol):
    """What the plan reads of the lint's result (:class:`chaos.gate.lint.LintResult`, which imports this
    module for the cases' outages): whether the claim is kept, and the findings that break it."""

    @property
    def kept(self) -> bool: ...

    @property
    def violations(self) -> tuple[Any, ...]: ...


DEFAULT_CASES: Final[tuple[str, ...]] = ("PB1", "ISR2", "L2", "D1", "MPI1")
"""A broker cut off (PB1), the ISR lost under a leader crash (ISR2 / L4), a leader crash with lagging
followers (L2), lost acks and retries (D1), a consumer slower than its poll interval (MPI1, only with a
``[consumer]``)."""

SERVICE_CASES: Final[tuple[str, ...]] = ("SV1",)
"""The default set of a gate file with a ``[service]``: the team's service killed while its output's leader
is down, then one of its instances frozen (SV1)."""


def default_cases(gate: GateFile) -> tuple[str, ...]:
    """The cases a gate file without ``cases`` runs: :data:`SERVICE_CASES` with a ``[service]``, else
    :data:`DEFAULT_CASES`."""
    return SERVICE_CASES if gate.service is not None else DEFAULT_CASES


@dataclass(frozen=True)
class Outage:
    """The longest a record stays readable and unread by the group in a case's timeline (``ci`` profile):
    what retention shorter than it removes before the group reads it (``expired_unread``).

    :param seconds: the figure, from the case's timing (its session timeouts, crash and restart times,
        processing per record); under ``faithful`` the timeouts are the seed's and the outage is longer, so
        the ``ci`` figure is a lower bound.
    :param why: where it comes from, in words.
    """

    seconds: float
    why: str

    def __post_init__(self) -> None:
        if not isinstance(self.seconds, int | float) or isinstance(self.seconds, bool) or self.seconds < 0:
            raise GateFileError([f"Outage.seconds: expected seconds >= 0; got {self.seconds!r}"])
        if not isinstance(self.why, str) or not self.why.strip():
            raise GateFileError(["Outage.why: expected a non-empty str"])


CONSUMER_OUTAGE: Final[Mapping[str, Outage]] = MappingProxyType(
    {
        "PB1": Outage(1.0, "the group read the 60 records before the cut; nothing is written during it"),
        "PB4": Outage(8.0, "each step's records are read after its broker fault: a fence takes 6 s"),
        "ISR2": Outage(
            15.0,
            "the partition is offline from the leader's crash (6 s to fence it, 3 s of writes) until it "
            "returns and the ISR is full again: its records wait on it",
        ),
        "ISR3": Outage(2.0, "writes are refused for 3 s; the group reads what was written along"),
        "MD1": Outage(8.0, "a broker cut off: its partitions are read again once it is fenced (6 s)"),
        "MD2": Outage(2.0, "metadata requests slowed; the group reads along"),
        "MD3": Outage(
            10.0, "the restarted member is assigned once the old member's session expires (9 s in ci)"
        ),
        "MPI1": Outage(
            12.0,
            "120 records written first; the slow member processes its partition's 60 at 0.18 s each",
        ),
        "L1": Outage(8.0, "the leader is cut off: its partition is read again once it is fenced (6 s)"),
        "L2": Outage(8.0, "the leader is killed: its partition is read again after the election (6 s)"),
        "DF1": Outage(
            8.0, "the leader's disk fills and it shuts down: its partition is read again after the election"
        ),
        "L6": Outage(
            10.0,
            "300 records written first; the member is killed 3.5 s into its batch and its successor is "
            "assigned once its session expires (6 s)",
        ),
        "D1": Outage(5.0, "the leader's answers are held 1.5 s per request until the heal"),
        "D3": Outage(
            8.0,
            "the member is killed mid-batch and restarted; it is assigned once the dead one's session "
            "expires (6 s)",
        ),
        "O1": Outage(
            40.0,
            "the group starts reading after the faults: the first records wait through the ISR shrink and "
            "three ISR dips",
        ),
        "O6": Outage(8.0, "the transform is killed and its successor assigned once its session expires"),
        "RN1": Outage(20.0, "random faults for 60 s; the longest single fault stalls a partition"),
        "CJ1": Outage(
            15.0,
            "the group stops after its first values and comes back once the leader's clock is real again",
        ),
        "PL1": Outage(
            20.0,
            "every broker of the partition loses power and is killed: its records are read again once the "
            "three have restarted together and elected a leader",
        ),
        "SV1": Outage(
            12.0,
            "the output's leader is down 10 s, one service instance killed in it: the records it held wait "
            "for the group's rebalance",
        ),
    }
)
"""Per catalog case, its group's longest outage (:class:`Outage`): the lint's
``retention_shorter_than_outage`` compares the topic's ``retention.ms`` with it."""

TRAFFIC_NOT_APPLICABLE: Final[Mapping[str, str]] = MappingProxyType(
    {
        "O6": (
            "the records it judges are its own transform's output, written by the case's clients; the "
            "team's traffic would reach only the transform's input"
        ),
    }
)
"""Cases whose producers do not take the gate file's ``[traffic]``, and why: the gate lists them as *not
applicable* rather than run them as if they had."""


def outage_cases(gate: GateFile) -> tuple[str, ...]:
    """The cases the lint judges retention against: the gate file's ``cases``, else the default set that
    applies (``--cases`` and the lint's own additions are not known to the lint)."""
    chosen = gate.cases if gate.cases is not None else default_cases(gate)
    return tuple(c for c in chosen if c in CONSUMER_OUTAGE and applies(c, gate))


def gate_cases(gate: GateFile, catalog: Iterable[str]) -> tuple[str, ...]:
    """The cases the full run replays, in catalog order: the gate file's ``cases`` (validated by
    :func:`~chaos.gate.gatefile.resolve_cases`: known, applicable), else the :data:`DEFAULT_CASES` the
    catalog has that apply to the configuration (:func:`default_cases`)."""
    known = tuple(catalog)
    chosen = resolve_cases(gate, known)
    if gate.cases is not None:
        return tuple(case for case in known if case in chosen)
    return tuple(case for case in known if case in default_cases(gate) and applies(case, gate))


@dataclass(frozen=True)
class CasePlan:
    """The cases a full run replays and why, beside the cases the lint names.

    :param run: the cases that run, in catalog order.
    :param chosen: how the set was chosen: ``default`` (the default set, widened by the lint), ``cases``
        (the gate file's ``cases =``) or ``--cases`` (the command line's, over the file's).
    :param added_by_lint: cases the default set lacked that the lint names for a rule that breaks the
        claim ("shown by"): they run too, so the run can show what the lint found.
    :param not_run: cases the lint names for such a rule that do not run, each with why (an explicit set
        left it out; not a case of this catalog; it does not apply to the configuration).
    """

    run: tuple[str, ...]
    chosen: str = "default"
    added_by_lint: tuple[str, ...] = ()
    not_run: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.chosen not in CHOICES:
            expected = ", ".join(CHOICES)
            raise GateFileError([f"CasePlan.chosen: expected one of {expected}; got {self.chosen!r}"])
        if set(self.added_by_lint) - set(self.run):
            raise GateFileError(["CasePlan: a case added by the lint must be among the cases that run"])

    def describe(self) -> str:
        """``the default set that applies, and added by the lint: L6`` — for the header and the lint's
        output."""
        text = {
            "default": "the default set that applies",
            "cases": "from the gate file's cases",
            "--cases": "from --cases",
        }[self.chosen]
        if self.added_by_lint:
            text += f", and added by the lint: {', '.join(self.added_by_lint)}"
        return text

    def not_run_text(self) -> str:
        """``L6 (left out by --cases), L4 (not a case of this catalog)``; empty when every case ran."""
        return ", ".join(f"{case} ({why})" for case, why in self.not_run)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": list(self.run),
            "chosen": self.chosen,
            "added_by_lint": list(self.added_by_lint),
            "not_run": [{"case": case, "why": why} for case, why in self.not_run],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CasePlan:
        return cls(
            tuple(data.get("run", ())),
            str(data.get("chosen", "default")),
            tuple(data.get("added_by_lint", ())),
            tuple((str(n["case"]), str(n["why"])) for n in data.get("not_run", ())),
        )


CHOICES: Final = ("default", "cases", "--cases")


def lint_cases(lint: LintResult) -> tuple[str, ...]:
    """The cases the lint names ("shown by") for the rules that break the claim, first named first."""
    named: dict[str, None] = {}
    for finding in lint.violations:
        named.update(dict.fromkeys(finding.rule.cases))
    return tuple(named)


def plan_cases(
    gate: GateFile,
    catalog: Iterable[str],
    lint: LintResult | None = None,
    cases: Sequence[str] | None = None,
) -> CasePlan:
    """The cases a full run replays: ``cases`` (``--cases``) over the gate file's ``cases``, else the
    default set widened by every case the lint names for a rule that breaks the claim — the run replays
    what the lint says fails. An explicit set is not widened: the lint's cases it leaves out are listed as
    not run. Raises :class:`GateFileError` for a case the catalog lacks or that does not apply."""
    known = tuple(catalog)
    if cases is not None:
        try:
            gate = replace(gate, cases=tuple(cases))
        except GateFileError as exc:
            raise GateFileError([p.replace("cases:", "--cases:", 1) for p in exc.problems]) from None
    run = gate_cases(gate, known)
    named = lint_cases(lint) if lint is not None and not lint.kept else ()
    chosen = "--cases" if cases is not None else "cases" if gate.cases is not None else "default"
    added: list[str] = []
    not_run: list[tuple[str, str]] = []
    for case in named:
        if case in run:
            continue
        if case not in known:
            not_run.append((case, "not a case of this catalog"))
        elif not applies(case, gate):
            not_run.append((case, f"needs {CASE_NEEDS[case][0]}"))
        elif chosen != "default":
            where = "--cases" if chosen == "--cases" else "the gate file's cases"
            not_run.append((case, f"left out by {where}"))
        else:
            added.append(case)
    if added:
        run = tuple(case for case in known if case in run or case in added)
    if lint is not None:
        # a case the catalog has no test of its own for (L4: ISR2's) is not missing when another case of
        # the same rule runs
        covered = {
            case
            for finding in lint.violations
            if any(c in run for c in finding.rule.cases)
            for case in finding.rule.cases
        }
        not_run = [(case, why) for case, why in not_run if case in known or case not in covered]
    return CasePlan(run, chosen, tuple(c for c in run if c in added), tuple(not_run))


def split_cases(text: str) -> tuple[str, ...]:
    """``--cases L2,L6`` (commas or spaces) as a tuple of catalog ids, in the order given."""
    return tuple(part for part in text.replace(",", " ").split() if part)
