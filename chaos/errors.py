"""The harness's exceptions: one root, specific subclasses, messages that say how to fix the problem."""

from __future__ import annotations


class ChaosError(Exception):
    """Root of every error the harness raises on purpose."""


class ConfigError(ChaosError, ValueError):
    """A configuration value is invalid; the message names the field and the accepted values."""


class EnvironmentProblem(ChaosError):
    """Something the harness needs on this machine is missing or not running.

    ``fix`` is the command (or instruction) that resolves it; ``chaos doctor`` prints it.
    """

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(f"{message}\n  fix: {fix}")
        self.problem = message
        self.fix = fix


class DockerUnavailable(EnvironmentProblem):
    """No Docker engine answers."""


class ToolMissing(EnvironmentProblem):
    """A build tool (debootstrap, mvn, go, java) is not installed."""


class ImageError(ChaosError):
    """An image could not be pulled or built."""


class ImagePullFailed(ImageError):
    """An official image could not be pulled (no registry reachable, or the tag does not exist)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class ImageBuildFailed(ImageError):
    """A local image build failed; the message carries the tail of the build output."""


class JarFetchFailed(ChaosError):
    """Maven could not fetch Spark's Kafka connector jars."""


class ClusterError(ChaosError):
    """The Kafka cluster could not be started or inspected; messages carry the broker log tail."""


class KafkaErrorAnswer(ClusterError):
    """A broker answered a request with a Kafka error code (``code``): an answer, not a timeout."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class ClusterStartTimeout(ClusterError):
    """The cluster did not become ready in time."""


class HistoryError(ChaosError):
    """A run's history could not be written or read."""


class AuditError(ChaosError):
    """The audit could not establish the facts (e.g. the topic could not be read)."""


class ToxiproxyError(ClusterError):
    """Toxiproxy's HTTP API refused a request or did not answer; the message carries its reply."""


class ProxyPortTaken(ToxiproxyError):
    """Toxiproxy could not listen on a proxy's port inside its container: something there holds it."""


class FaultError(ChaosError):
    """A fault could not be injected or healed; the message says which and how to clean up."""


class FaultUnsupported(FaultError, ClusterError):
    """This cluster cannot take a fault of this kind (its image or configuration lacks what the fault needs: a
    clock fault's libfaketime, a disk fault's log directory of its own); the message names the fix."""


class PlanError(ChaosError, ValueError):
    """A fault plan is invalid or cannot be parsed; the message names the offending step."""


class WorkloadError(ChaosError):
    """A workload (producer, consumer member, reader, drain, sampler) was misused or could not run."""
