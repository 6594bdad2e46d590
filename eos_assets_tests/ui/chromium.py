"""Debian's Chromium, headless, for the UI tests: render a page of the Dagster UI and read its text.

The pages are rendered as a first-time visitor sees them, from a fresh profile; the text is read
from the rendered DOM, and a screenshot of each page is kept for a human to look at.
"""

import base64
import json
import os
import signal
import subprocess
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

from websockets.sync.client import ClientConnection, connect

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps calling home, which a closed
# network refuses; a fresh profile per test keeps runs independent.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--window-size=1600,1000",
]
# For one-shot captures: virtual time stands still while requests are pending, so the React
# app's GraphQL answers arrive and render before the page is captured.
VIRTUAL_TIME = "--virtual-time-budget=20000"
ATTEMPTS = 4


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.texts.append(data.strip())


def texts(dom: str) -> list[str]:
    """Every text node of the rendered DOM."""
    parser = _Text()
    parser.feed(dom)
    return parser.texts


def shown(name: str, rendered: list[str]) -> bool:
    """True when ``name`` is rendered whole, or middle-truncated (``kpi_dai…_customers``)."""
    for text in rendered:
        head, sep, tail = text.partition("…")
        if text == name or (sep and name.startswith(head) and name.endswith(tail) and head):
            return True
    return False


def status_of(name: str, rendered: list[str]) -> str:
    """The first text rendered after ``name`` (its status in the list), lowercased."""
    after = False
    for text in rendered:
        if shown(name, [text]):
            after = True
        elif after:
            return text.lower()
    return ""


def chromium(profile: Path, *args: str) -> str:
    """Run headless Chromium once; its own process group is killed if it overruns."""
    proc = subprocess.Popen(
        [CHROMIUM, *FLAGS, VIRTUAL_TIME, f"--user-data-dir={profile}", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    return out.decode(errors="replace")


def render(url: str, profile: Path, screenshot: Path, names: list[str]) -> list[str]:
    """The text of ``url`` once every name is rendered (a few tries), and a screenshot."""
    rendered: list[str] = []
    for _ in range(ATTEMPTS):
        rendered = texts(chromium(profile, "--dump-dom", url))
        if all(shown(n, rendered) for n in names):
            break
    chromium(profile, f"--screenshot={screenshot}", url)
    assert screenshot.stat().st_size > 10_000, f"empty screenshot of {url}"
    return rendered


def click_and_read(
    url: str, profile: Path, screenshot: Path, click: str, expect: str, timeout: float = 90
) -> str:
    """Open ``url``, click the first button reading ``click``, and return the page's text once
    it holds ``expect`` (or at ``timeout``), keeping a screenshot of that state.

    Driven over the DevTools protocol: ``--dump-dom`` alone cannot open what a click opens
    (a tick's details dialog).
    """
    proc = subprocess.Popen(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        with connect(_page_socket(profile, time.monotonic() + 30), max_size=None) as page:
            devtools = _DevTools(page)
            devtools.call("Page.navigate", url=url)
            deadline = time.monotonic() + timeout
            clicked, text = False, ""
            while time.monotonic() < deadline:
                if not clicked:
                    clicked = devtools.evaluate(_CLICK % json.dumps(click)) is True
                text = str(devtools.evaluate("document.body ? document.body.innerText : ''"))
                if clicked and expect in text:
                    break
                time.sleep(0.5)
            shot = devtools.call("Page.captureScreenshot", format="png")["data"]
            screenshot.write_bytes(base64.b64decode(shot))
            return text
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


_CLICK = """(() => {
  const b = [...document.querySelectorAll('button')].find(e => e.innerText.trim() === %s);
  if (!b) return false;
  b.click();
  return true;
})()"""


def _page_socket(profile: Path, deadline: float) -> str:
    """The DevTools websocket of the browser's first page, once the browser listens."""
    port_file = profile / "DevToolsActivePort"
    while time.monotonic() < deadline:
        if port_file.exists() and port_file.read_text().strip():
            port = port_file.read_text().split()[0]
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                pages = [t for t in json.load(r) if t["type"] == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
        time.sleep(0.2)
    raise AssertionError("Chromium did not open its DevTools port within 30 s")


class _DevTools:
    """Numbered DevTools requests on one page's websocket; events in between are skipped."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.next_id = 0

    def call(self, method: str, **params: object) -> dict:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=30))
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return message["result"]

    def evaluate(self, expression: str) -> object:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")
