"""Which topics the harness may delete: the ones clients created, never Kafka's own."""

from __future__ import annotations

import pytest

from chaos.cluster import introspect
from chaos.errors import ClusterError


def test_kafkas_own_topics_are_internal_and_a_tests_are_not() -> None:
    assert introspect.is_internal("__consumer_offsets")
    assert introspect.is_internal("__transaction_state")
    assert not introspect.is_internal("t-isr2-vulnerable-1a2b3c")
    assert not introspect.is_internal("in-o6-remediated-1a2b3c")


def test_deleting_an_internal_topic_is_refused_before_anything_is_asked() -> None:
    """A cluster that would raise on any use: the refusal comes first, naming the topic and why."""

    class Untouchable:
        def admin(self) -> object:
            raise AssertionError("the cluster was asked")

    with pytest.raises(ClusterError, match=r"(?s)__consumer_offsets.*group coordinators unloaded"):
        introspect.delete_topics(Untouchable(), ["t-1", "__consumer_offsets"], 5.0)  # type: ignore[arg-type]
    introspect.delete_topics(Untouchable(), [], 5.0)  # type: ignore[arg-type]  # nothing to delete: no call
