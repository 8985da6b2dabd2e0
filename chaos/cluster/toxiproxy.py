"""A thin client for Toxiproxy's HTTP API (v2.12), with timeouts, raising on every 4xx/5xx.

Why not toxiproxy-python: it keeps host and port as class-level globals (two clusters in one process
would share them), sends requests without a timeout (a frozen server hangs the test forever) and
ignores 5xx answers (a failed toxic looks applied). The API is six endpoints; wrapping them with
``requests`` is shorter than working around those three problems.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import requests

from chaos.errors import ProxyPortTaken, ToxiproxyError

Stream = Literal["upstream", "downstream"]
API_PORT = 8474


@dataclass(frozen=True)
class ProxySpec:
    """One proxy: a name, the address it listens on inside the Toxiproxy container, and its upstream."""

    name: str
    listen: str
    upstream: str


class Toxiproxy:
    """One Toxiproxy server, reached at ``base_url`` (e.g. ``http://127.0.0.1:32811``)."""

    def __init__(self, base_url: str, timeout_s: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._session = requests.Session()

    def close(self) -> None:
        self._session.close()

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        url = f"{self.base_url}{path}"
        try:
            response = self._session.request(method, url, json=body, timeout=self.timeout_s)
        except requests.RequestException as exc:
            raise ToxiproxyError(
                f"Toxiproxy did not answer {method} {path} within {self.timeout_s} s ({exc}); "
                f"is its container running? (`docker ps --filter label=chaos-harness`)"
            ) from exc
        if response.status_code >= 400:
            raise ToxiproxyError(
                f"Toxiproxy answered {response.status_code} to {method} {path} {body!r}: "
                f"{response.text.strip()[:500]}"
            )
        if not response.content:
            return None
        return response.json()

    def version(self) -> str:
        return str(self._call("GET", "/version"))

    def ready(self) -> bool:
        """True when the API answers (used while waiting for the container)."""
        try:
            self._call("GET", "/version")
        except ToxiproxyError:
            return False
        return True

    def create(self, spec: ProxySpec) -> None:
        """Create and enable a proxy; :class:`ProxyPortTaken` when its listen port is in use in there."""
        try:
            self._call(
                "POST", "/proxies", {"name": spec.name, "listen": spec.listen, "upstream": spec.upstream}
            )
        except ToxiproxyError as exc:
            if "address already in use" in str(exc):
                raise ProxyPortTaken(str(exc)) from exc
            raise

    def proxies(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/proxies")
        return result

    def set_enabled(self, proxy: str, enabled: bool) -> None:
        """Disable a proxy: it closes its listener and every connection, so connects are refused."""
        self._call("POST", f"/proxies/{proxy}", {"enabled": enabled})

    def add_toxic(
        self,
        proxy: str,
        name: str,
        kind: str,
        stream: Stream,
        attributes: dict[str, int],
        toxicity: float = 1.0,
    ) -> None:
        self._call(
            "POST",
            f"/proxies/{proxy}/toxics",
            {"name": name, "type": kind, "stream": stream, "toxicity": toxicity, "attributes": attributes},
        )

    def remove_toxic(self, proxy: str, name: str, missing_ok: bool = True) -> None:
        try:
            self._call("DELETE", f"/proxies/{proxy}/toxics/{name}")
        except ToxiproxyError as exc:
            if not (missing_ok and " 404 " in str(exc)):
                raise

    def toxics(self, proxy: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", f"/proxies/{proxy}/toxics")
        return result

    def reset(self) -> None:
        """Enable every proxy and remove every toxic (Toxiproxy's own POST /reset)."""
        self._call("POST", "/reset")
