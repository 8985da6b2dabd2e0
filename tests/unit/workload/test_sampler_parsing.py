"""The sampler's pure helpers: bootstrap parsing and group-state names."""

from __future__ import annotations

import pytest

from chaos.errors import ConfigError
from chaos.workload.sampler import bootstrap_addresses, group_state_name


def test_bootstrap_addresses_in_order() -> None:
    assert bootstrap_addresses("127.0.0.1:9092, 127.0.0.1:9093") == [("127.0.0.1", 9092), ("127.0.0.1", 9093)]


@pytest.mark.parametrize("bad", ["", "127.0.0.1", "127.0.0.1:", ":9092", "host:port"])
def test_bootstrap_addresses_reject_malformed_entries(bad: str) -> None:
    with pytest.raises(ConfigError, match="expected host:port"):
        bootstrap_addresses(bad)


@pytest.mark.parametrize(
    ("wire", "admin"),
    [
        ("Stable", "STABLE"),
        ("PreparingRebalance", "PREPARING_REBALANCE"),
        ("CompletingRebalance", "COMPLETING_REBALANCE"),
        ("Empty", "EMPTY"),
        ("Dead", "DEAD"),
    ],
)
def test_group_state_names_match_the_admin_api(wire: str, admin: str) -> None:
    assert group_state_name(wire) == admin
