"""The run: the context every stage is handed and the files a run directory holds, each format owned by
one module here. Below every stage of the pipeline; imports none of them."""

from chaos.run.evidence import Check, Evidence, EvidenceLog, read_evidence, write_evidence
from chaos.run.terms import GUARANTEES, VERDICTS, Guarantee, Verdict

__all__ = [
    "GUARANTEES",
    "VERDICTS",
    "Check",
    "Evidence",
    "EvidenceLog",
    "Guarantee",
    "Verdict",
    "read_evidence",
    "write_evidence",
]
