"""A team's own service under chaos: the application a team ships, run as a black box between an input
topic the harness writes (recorded) and an output topic the harness reads (the run's topic, what the
audit reads), with faults on the service itself (:mod:`chaos.service.faults`). docs/your-service.md.

A scenario starts it with ``run.service(ServiceSpec(...))``.
"""

from chaos.service.faults import ServiceCrash, ServicePause, ServiceStop
from chaos.service.handle import Service, input_client
from chaos.service.instance import InstanceState, ServiceError, ServiceInstance
from chaos.service.spec import Binding, ServiceConfigError, ServiceSpec

__all__ = [
    "Binding",
    "InstanceState",
    "Service",
    "ServiceConfigError",
    "ServiceCrash",
    "ServiceError",
    "ServiceInstance",
    "ServicePause",
    "ServiceSpec",
    "ServiceStop",
    "input_client",
]
