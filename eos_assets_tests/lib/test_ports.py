"""Free and busy ports on 127.0.0.1, as the local services pick theirs."""

import socket

import pytest

from eos_assets.lib.ports import free_port, port_free


def test_a_listening_port_is_busy_and_free_once_closed() -> None:
    port = free_port()
    assert 1024 <= port <= 65535
    assert port_free(port)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", port))
        server.listen()
        assert not port_free(port)
    assert port_free(port)


def test_a_port_left_in_time_wait_counts_as_free() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()  # the server side closes first: its end waits in TIME_WAIT
        client.close()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))  # the TIME_WAIT is there: a plain bind is refused
    assert port_free(port)
