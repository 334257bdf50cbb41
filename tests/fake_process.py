"""A fake provider server (tests/fake_*_server.py) run as its own process, and a
client for its control API (/_script, /_requests). The sidecar under test talks to
it over real loopback sockets; nothing is mocked."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

TESTS = Path(__file__).parent


class FakeServerProcess:
    def __init__(self, process: asyncio.subprocess.Process, port: int, base_path: str) -> None:
        self.process = process
        self.port = port
        self.base_path = base_path
        self.http = aiohttp.ClientSession(f"http://127.0.0.1:{port}")

    @property
    def base_url(self) -> str:
        """What the provider SDK is given: OpenAI wants `/v1`, Anthropic the server root."""
        return f"http://127.0.0.1:{self.port}{self.base_path}"

    @classmethod
    async def start(cls, script: str, port_file: Path, *, base_path: str) -> FakeServerProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(TESTS / script),
            "--port-file",
            str(port_file),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while not await asyncio.to_thread(port_file.exists):
            if process.returncode is not None or time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
                raise RuntimeError(f"{script} did not start (exit {process.returncode})")
            await asyncio.sleep(0.02)
        port = await asyncio.to_thread(port_file.read_text, encoding="utf-8")
        return cls(process, int(port), base_path)

    async def script(self, *replies: dict[str, Any]) -> None:
        async with self.http.post("/_script", json=list(replies)) as response:
            assert response.status == 200, await response.text()

    async def requests(self) -> list[dict[str, Any]]:
        async with self.http.get("/_requests") as response:
            assert response.status == 200
            body: dict[str, Any] = await response.json()
            return list(body["requests"])

    async def wait_requests(self, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while len(seen := await self.requests()) < count:
            assert time.monotonic() < deadline, f"the fake server saw {len(seen)} < {count}"
            await asyncio.sleep(0.02)
        return seen

    async def wait_abandoned(self, timeout: float = 5.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            seen = await self.requests()
            abandoned = [r for r in seen if r["abandoned"]]
            if abandoned:
                return abandoned[0]
            assert time.monotonic() < deadline, f"no request was abandoned: {seen}"
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        await self.http.close()
        if self.process.returncode is None:
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), 5)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
