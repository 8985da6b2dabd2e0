"""Where the audit's Spark driver listens: loopback for a local master, reachable for a cluster's."""

from __future__ import annotations

import pytest

from chaos.audit.spark import DRIVER_BIND_ENV, DRIVER_HOST_ENV, driver_address


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DRIVER_HOST_ENV, raising=False)
    monkeypatch.delenv(DRIVER_BIND_ENV, raising=False)


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]"])
def test_a_local_master_keeps_the_driver_on_loopback(master: str) -> None:
    assert driver_address(master) == {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }


@pytest.mark.parametrize("master", ["spark://10.0.0.5:7077", "yarn", "k8s://https://10.0.0.1:6443"])
def test_a_cluster_master_leaves_the_address_to_spark(master: str) -> None:
    assert driver_address(master) == {}


def test_the_environment_names_the_address_for_any_master(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DRIVER_HOST_ENV, "10.0.0.9")
    assert driver_address("spark://10.0.0.5:7077") == {
        "spark.driver.host": "10.0.0.9",
        "spark.driver.bindAddress": "10.0.0.9",
    }
    monkeypatch.setenv(DRIVER_BIND_ENV, "0.0.0.0")
    assert driver_address("local[2]") == {
        "spark.driver.host": "10.0.0.9",
        "spark.driver.bindAddress": "0.0.0.0",
    }
