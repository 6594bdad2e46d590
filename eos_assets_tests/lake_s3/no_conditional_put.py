"""Stores without conditional writes, for the tests: a proxy in front of an S3 server that
either refuses every ``PUT`` carrying ``If-None-Match`` with ``501 NotImplemented`` (as AWS S3
did before it supported the header) or drops the header and passes the ``PUT`` on, so that
the server overwrites the key (a store that silently ignores the condition). Every other
request passes through unchanged. The header is signed: a server behind an ``ignore`` proxy
must check no signature (``s3server.start_server(..., anonymous=True)``)."""

import http.client
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

Answer = Literal["refuse", "ignore"]

_REFUSED = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>NotImplemented</Code><Message>A "
    b"header you provided implies functionality that is not implemented</Message></Error>"
)


def _handler(upstream: int, answer: Answer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            if self.command == "PUT" and "If-None-Match" in self.headers:
                if answer == "refuse":
                    self._reply(501, [("Content-Type", "application/xml")], _REFUSED)
                    return
                del self.headers["If-None-Match"]
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=30)
            try:
                conn.request(self.command, self.path, body=body, headers=dict(self.headers))
                response = conn.getresponse()
                data = response.read()
            finally:
                conn.close()
            skip = {"transfer-encoding", "connection", "content-length"}
            kept = [(k, v) for k, v in response.getheaders() if k.lower() not in skip]
            self._reply(response.status, kept, data)

        def _reply(self, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: the test reads the product's errors, not the proxy's log."""

    return Handler


@contextmanager
def without_conditional_puts(upstream_endpoint: str, answer: Answer) -> Iterator[str]:
    """Run the proxy in a thread for the block; yield its endpoint URL."""
    upstream = int(upstream_endpoint.rsplit(":", 1)[1])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(upstream, answer))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
