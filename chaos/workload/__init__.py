"""The workload: producers, consumer-group members, restore readers, the final drain and probes.

Every worker takes the run's :class:`~chaos.run.context.RunContext` (run id, bootstrap servers, topic,
group, client and time profiles, and the *sink* its events go to, normally ``Recorder.record``) and only
its own options; nothing here interprets results. docs/workload.md describes the profiles, the outcome
classification and each worker.
"""

from chaos.run.context import RunContext
from chaos.workload.common import ClientLogBridge, Sink, generation_of, member_fields, member_id_of
from chaos.workload.composed import (
    THROUGHPUT_CONSUMER,
    THROUGHPUT_PRODUCER,
    WorkloadPlan,
    WorkloadResult,
    run_workload,
)
from chaos.workload.configs import (
    ACKS1,
    AT_LEAST_ONCE,
    CI,
    FAITHFUL,
    FIRE_AND_FORGET,
    IDEMPOTENT,
    PROFILES,
    TRANSACTIONAL,
    ClientProfile,
    Guarantee,
    TimeProfile,
    admin_config,
    consumer_config,
    custom_profile,
    producer_config,
    profile,
    time_profile,
)
from chaos.workload.consumer import (
    COMMIT_STRATEGIES,
    ChildProcess,
    CommitStrategy,
    ConsumerGroup,
    DeliveryPoint,
    MemberSpec,
    Processing,
    ProcessMember,
    ThreadMember,
    next_offsets,
    rebalance_callbacks,
    run_member,
)
from chaos.workload.java_client import AnyProducer, JavaMember, JavaProducer
from chaos.workload.outcomes import Classified, classify_delivery_error, classify_produce_exception
from chaos.workload.producer import ProducerSpec, ProducerStats, ProducerWorker
from chaos.workload.producer_process import Checkpoint, ProcessProducer, ProcessProducerSpec
from chaos.workload.readers import DrainSummary, RestoreReader, RestoreResult, drain, startup_probe
from chaos.workload.sampler import ClusterSampler
from chaos.workload.traffic import Traffic, TrafficShape
from chaos.workload.transactional import TransactionalWorker, TxnWorkerSpec, run_txn_worker
from chaos.workload.txn_producer import (
    TransactionalProducer,
    TxnProducerSpec,
    TxnProducerStats,
    run_txn_producer,
)

__all__ = [
    "ACKS1",
    "AT_LEAST_ONCE",
    "CI",
    "COMMIT_STRATEGIES",
    "FAITHFUL",
    "FIRE_AND_FORGET",
    "IDEMPOTENT",
    "PROFILES",
    "THROUGHPUT_CONSUMER",
    "THROUGHPUT_PRODUCER",
    "TRANSACTIONAL",
    "AnyProducer",
    "Checkpoint",
    "ChildProcess",
    "Classified",
    "ClientLogBridge",
    "ClientProfile",
    "ClusterSampler",
    "CommitStrategy",
    "ConsumerGroup",
    "DeliveryPoint",
    "DrainSummary",
    "Guarantee",
    "JavaMember",
    "JavaProducer",
    "MemberSpec",
    "ProcessMember",
    "ProcessProducer",
    "ProcessProducerSpec",
    "Processing",
    "ProducerSpec",
    "ProducerStats",
    "ProducerWorker",
    "RestoreReader",
    "RestoreResult",
    "RunContext",
    "Sink",
    "ThreadMember",
    "TimeProfile",
    "Traffic",
    "TrafficShape",
    "TransactionalProducer",
    "TransactionalWorker",
    "TxnProducerSpec",
    "TxnProducerStats",
    "TxnWorkerSpec",
    "WorkloadPlan",
    "WorkloadResult",
    "admin_config",
    "classify_delivery_error",
    "classify_produce_exception",
    "consumer_config",
    "custom_profile",
    "drain",
    "generation_of",
    "member_fields",
    "member_id_of",
    "next_offsets",
    "producer_config",
    "profile",
    "rebalance_callbacks",
    "run_member",
    "run_txn_producer",
    "run_txn_worker",
    "run_workload",
    "startup_probe",
    "time_profile",
]
