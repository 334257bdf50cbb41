"""The session's listener bound at once and served once aiohttp is loaded
(`sidecar/http/deferred.py`): what a client that comes early sees, over real sockets."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Iterator

import aiohttp
import pytest

from sidecar.http import deferred
from sidecar.preload import Preload
from tests.test_http_listener import AUTH, TOKEN, FakeTarget


@pytest.fixture
def held() -> Iterator[threading.Event]:
    """aiohttp's listener module 'still loading' until the event is set."""
    release = threading.Event()
    real = deferred.LISTENER

    def load() -> None:
        release.wait(30)
        real.ensure()

    deferred.LISTENER = Preload(load)
    try:
        yield release
    finally:
        release.set()
        deferred.LISTENER = real


def _raw_request(port: int) -> socket.socket:
    """A status request written before anything serves the port (the kernel queues it)."""
    client = socket.create_connection(("127.0.0.1", port), timeout=10)
    client.sendall(
        f"GET /agent/status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n".encode()
    )
    return client


async def test_a_client_that_connects_before_aiohttp_is_loaded_is_answered(
    held: threading.Event,
) -> None:
    target = FakeTarget()
    listener = await deferred.open_listener(target, TOKEN)
    assert listener is not None and listener.url == f"http://127.0.0.1:{listener.port}"
    client = await asyncio.to_thread(_raw_request, listener.port)
    try:
        await asyncio.sleep(0.2)
        assert not deferred.LISTENER.done  # nothing serves yet: the request waits
        held.set()
        await listener.serving()
        answer = await asyncio.to_thread(client.recv, 65536)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        async with aiohttp.ClientSession() as http:  # and later clients as usual
            async with http.get(f"{listener.url}/agent/status", headers=AUTH) as response:
                assert response.status == 200
                assert (await response.json())["sessionId"] == "sess-1"
    finally:
        client.close()
        await listener.stop()


async def test_stopped_before_it_served_the_port_is_closed_and_nothing_is_left(
    held: threading.Event,
) -> None:
    listener = await deferred.open_listener(FakeTarget(), TOKEN)
    assert listener is not None
    await listener.stop()
    await listener.stop()  # idempotent
    held.set()
    await listener.serving()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", listener.port), timeout=5).close()


async def test_a_listener_that_cannot_serve_is_logged_and_its_port_closed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    real = deferred.LISTENER

    def broken() -> None:
        raise ImportError("no aiohttp here")

    deferred.LISTENER = Preload(broken)
    try:
        with caplog.at_level(logging.ERROR, logger="sidecar.http"):
            listener = await deferred.open_listener(FakeTarget(), TOKEN)
            assert listener is not None
            await listener.serving()
        assert "could not start serving: no aiohttp here" in caplog.text
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", listener.port), timeout=5).close()
        await listener.stop()  # still fine to stop
    finally:
        deferred.LISTENER = real


async def test_bad_arguments_are_refused_before_a_socket_is_bound() -> None:
    with pytest.raises(ValueError, match="token"):
        await deferred.open_listener(FakeTarget(), "")
    with pytest.raises(ValueError, match="max_body"):
        await deferred.open_listener(FakeTarget(), TOKEN, max_body=0)
