"""The run: the context every stage is handed and the files a run directory holds, each format owned by
one module here. Below every stage of the pipeline; imports none of them."""

from chaos.run.context import RunContext
from chaos.run.evidence import Check, Evidence, EvidenceLog, read_evidence, write_evidence
from chaos.run.profiles import TIME_PROFILE_NAMES, TIME_PROFILES, ClientProfile, TimeProfile, time_profile
from chaos.run.terms import GUARANTEES, VERDICTS, Guarantee, Verdict

__all__ = [
    "GUARANTEES",
    "TIME_PROFILES",
    "TIME_PROFILE_NAMES",
    "VERDICTS",
    "Check",
    "ClientProfile",
    "Evidence",
    "EvidenceLog",
    "Guarantee",
    "RunContext",
    "TimeProfile",
    "Verdict",
    "read_evidence",
    "time_profile",
    "write_evidence",
]
