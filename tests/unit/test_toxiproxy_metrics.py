"""``Toxiproxy.received_bytes`` reads Toxiproxy 2.12's Prometheus counters (the text it serves at /metrics
with ``-proxy-metrics``), per proxy and stream."""

from __future__ import annotations

from typing import Any

import pytest

from chaos.cluster.toxiproxy import Toxiproxy

# ruff: noqa: E501

METRICS = """\
# a scrape of Toxiproxy 2.12 (long lines: the format has no continuation)
# HELP toxiproxy_proxy_received_bytes_total
# TYPE toxiproxy_proxy_received_bytes_total counter
toxiproxy_proxy_received_bytes_total{direction="downstream",listener="[::]:9001",proxy="ext-1",upstream="kafka-1:9092"} 72210
toxiproxy_proxy_received_bytes_total{direction="upstream",listener="[::]:9001",proxy="ext-1",upstream="kafka-1:9092"} 1.5e+06
toxiproxy_proxy_received_bytes_total{direction="upstream",listener="[::]:19002",proxy="int-2",upstream="kafka-2:19092"} 0
# HELP toxiproxy_proxy_sent_bytes_total
# TYPE toxiproxy_proxy_sent_bytes_total counter
toxiproxy_proxy_sent_bytes_total{direction="downstream",listener="[::]:9001",proxy="ext-1",upstream="kafka-1:9092"} 999
"""


def test_received_bytes_per_proxy_and_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = Toxiproxy("http://127.0.0.1:1")
    asked: list[tuple[str, str]] = []

    def call(method: str, path: str, body: Any = None, *, text: bool = False) -> str:
        asked.append((method, path))
        assert text
        return METRICS

    monkeypatch.setattr(proxy, "_call", call)
    assert proxy.received_bytes() == {
        ("ext-1", "downstream"): 72210,
        ("ext-1", "upstream"): 1_500_000,
        ("int-2", "upstream"): 0,
    }
    assert asked == [("GET", "/metrics")]


def test_no_counters_served_is_no_traffic_known(monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = Toxiproxy("http://127.0.0.1:1")
    monkeypatch.setattr(proxy, "_call", lambda *a, **k: "# no proxy metrics\n")
    assert proxy.received_bytes() == {}
