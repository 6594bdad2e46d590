"""TCP ports on 127.0.0.1 for the local services (the embedded broker, the Spark server)."""

import contextlib
import socket
from pathlib import Path


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # SO_REUSEADDR as servers use it, so a port in TIME_WAIT does not count as busy.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port nothing listens on now, chosen by the kernel."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def previous_port(saved: Path) -> int:
    """The port a service recorded in ``saved`` when it is free again, else 0 (any): what was
    configured to reach it before a restart still does."""
    with contextlib.suppress(FileNotFoundError, ValueError):
        previous = int(saved.read_text())
        return previous if port_free(previous) else 0
    return 0
