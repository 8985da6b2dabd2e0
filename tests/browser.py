"""Debian's headless Chromium driven over the DevTools protocol (websocket-client): the report's browser
test and the screenshot script (``make screenshots``) share it."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
    "--window-size=1280,900",
)


def section_end(heading: str) -> str:
    """A selector for the heading that ends the section ``heading`` (a selector) opens: the next h2 or h3."""
    return f"{heading} ~ h2, {heading} ~ h3"


class Page:
    """One Chromium page over the DevTools protocol: navigate, evaluate, collect console errors."""

    def __init__(self, ws_url: str) -> None:
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.ids = itertools.count(1)
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        for method in ("Runtime.enable", "Log.enable", "Page.enable"):
            self.call(method)

    def _event(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(json.dumps(params.get("args"))[:500])
        elif method == "Runtime.exceptionThrown":
            self.errors.append(json.dumps(params.get("exceptionDetails"))[:500])
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append(str(params["entry"].get("text"))[:500])
        elif method == "Page.javascriptDialogOpening":
            self.dialogs.append(str(params.get("message")))
            self.call("Page.handleJavaScriptDialog", accept=True)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self.ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self._event(message)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, wait_for: str, timeout_s: float = 60.0) -> None:
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout_s
        condition = f"document.readyState === 'complete' && ({wait_for})"
        while time.monotonic() < deadline:
            if self.evaluate(condition):  # each call also reads the events that arrived meanwhile
                return
            time.sleep(0.2)
        raise AssertionError(f"{url}: {wait_for!r} not true after {timeout_s} s (errors: {self.errors})")

    def screenshot(self, target: Path) -> None:
        """The whole page at 1280 px wide (up to 16,000 px high) as a PNG."""
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=1280,
            height=min(height, 16000),
            deviceScaleFactor=1,
            mobile=False,
        )
        time.sleep(0.5)  # let responsive charts settle at the new size
        self._capture(target)
        self.call("Emulation.clearDeviceMetricsOverride")

    def section(self, heading: str) -> tuple[float, float]:
        """:meth:`span` of the section a heading (``heading``, a selector) opens: to the next heading."""
        return self.span(heading, section_end(heading))

    def span(self, selector: str, until: str | None = None) -> tuple[float, float]:
        """``(top, bottom)`` in page pixels: from the top of the first element ``selector`` matches down to
        the top of the first element ``until`` matches (else to the element's own bottom)."""
        box = self.evaluate(
            f"""(() => {{
              const a = document.querySelector({json.dumps(selector)});
              const b = {json.dumps(until)} && document.querySelector({json.dumps(until)});
              const top = a.getBoundingClientRect().top + window.scrollY;
              const bottom = b ? b.getBoundingClientRect().top + window.scrollY
                               : a.getBoundingClientRect().bottom + window.scrollY;
              return [top, bottom];
            }})()"""
        )
        return float(box[0]), float(box[1])

    def element_screenshot(self, selector: str, target: Path, *, until: str | None = None) -> float:
        """:meth:`span` ``(selector, until)``, 1280 px wide, as a PNG; returns its height in px."""
        top, bottom = self.span(selector, until)
        height = max(bottom - top, 1.0)
        self._capture(target, clip={"x": 0, "y": top, "width": 1280, "height": height, "scale": 1})
        return height

    def _capture(self, target: Path, **params: Any) -> None:
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, **params)
        target.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        self.ws.close()


@contextlib.contextmanager
def chromium() -> Iterator[Page]:
    """A fresh headless Chromium (its own profile, removed after) and its first page."""
    # make setup installs it; a missing one is a setup failure, never a silent skip
    assert CHROMIUM is not None, "Debian's chromium package is not installed: run make setup"
    profile = Path(tempfile.mkdtemp(prefix="chaos-chromium-"))
    proc = subprocess.Popen(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"chromium did not start (exit {proc.poll()})")
            time.sleep(0.2)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            targets = json.load(answer)
        ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")
        driver = Page(ws_url)
        try:
            yield driver
        finally:
            driver.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        shutil.rmtree(profile, ignore_errors=True)
