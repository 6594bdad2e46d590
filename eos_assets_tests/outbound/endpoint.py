"""A real HTTP alert endpoint for the tests: applies each idempotency key once, answers GET by
key, and can be told to fail (500), to time out after applying, or be down (a closed port)."""

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from eos_assets.lib.outbound.alert_delivery import IDEMPOTENCY_HEADER

PATH = "/alerts"


@dataclass
class Behaviour:
    """What the endpoint does with the next POSTs (a count of 0 means: behave)."""

    fail_next: int = 0  # answer 500 without applying
    fail_always: bool = False
    hang_next: int = 0  # apply, then answer only after ``hang_s``
    hang_s: float = 2.0


@dataclass
class Endpoint:
    """The server's memory: every request, and the first body applied per key."""

    behaviour: Behaviour = field(default_factory=Behaviour)
    posts: list[str] = field(default_factory=list)
    gets: list[str] = field(default_factory=list)
    applied: dict[str, dict[str, Any]] = field(default_factory=dict)
    applications: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """Where alerts are POSTed."""
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}{PATH}"

    def start(self) -> "Endpoint":
        """Serve in a daemon thread on a free port of 127.0.0.1."""
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                key = self.headers.get(IDEMPOTENCY_HEADER) or ""
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hang = 0.0
                with endpoint.lock:
                    endpoint.posts.append(key)
                    rule = endpoint.behaviour
                    if rule.fail_always or rule.fail_next > 0:
                        rule.fail_next = max(0, rule.fail_next - 1)
                        self._answer(500, {"error": "told to fail"})
                        return
                    if key and key not in endpoint.applied:
                        endpoint.applied[key] = body
                        endpoint.applications[key] = endpoint.applications.get(key, 0) + 1
                    if rule.hang_next > 0:
                        rule.hang_next -= 1
                        hang = rule.hang_s
                time.sleep(hang)
                self._answer(200, {"applied": key})

            def do_GET(self) -> None:
                key = self.path.removeprefix(PATH + "/")
                with endpoint.lock:
                    endpoint.gets.append(key)
                    found = key in endpoint.applied
                self._answer(200 if found else 404, {"key": key, "applied": found})

            def _answer(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a timeout it was meant to hit)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens: the endpoint is down."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}{PATH}"
