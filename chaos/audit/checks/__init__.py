"""The audit's checks, one module per family, each holding its Spark part and its reference part side by
side: :mod:`~chaos.audit.checks.values`, :mod:`~chaos.audit.checks.order`,
:mod:`~chaos.audit.checks.consumer_side`, :mod:`~chaos.audit.checks.transactions`,
:mod:`~chaos.audit.checks.availability`, :mod:`~chaos.audit.checks.removals`; the Spark frames several
of them read are built in :mod:`~chaos.audit.checks.frames`. The engines' entry points compose them:
:func:`chaos.audit.sparkjob.spark_audit` and :func:`chaos.audit.reference.reference_audit`.
"""
