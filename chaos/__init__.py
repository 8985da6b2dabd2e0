"""A fault-injection chaos harness for Apache Kafka.

The pipeline, one package per stage, data flowing one way::

    cluster -> faults -> workload -> history -> audit -> gate -> report
"""

__version__ = "0.1.0"
