"""A spawned command: iterate its output, write its stdin, wait for its end, kill it.

Stdin goes out in order, each piece tagged with the byte offset it starts at, so a piece sent
again after a dropped socket is taken once; a piece refused as overloaded (the command has not
read what it was given) waits the hinted time and goes again, so ``write`` returning is the
writer's backpressure.
"""
from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from .errors import NotFoundError, OverloadedError, WarrenError, invalid
from .exec import Chunk, ExecPump, ExecResult
from .link import Link

STDIN_PIECE_BYTES = 256 * 1024
STDIN_TIMEOUT_S = 10.0
STDIN_MAX_WAITS = 1000


class StdinWriter:
    """The offsets and ordering of one command's stdin."""

    def __init__(self, link: Link, sandbox_id: str, exec_id: str, started: "asyncio.Future[Any]") -> None:
        self.link = link
        self.sandbox_id = sandbox_id
        self.exec_id = exec_id
        self._started = started
        self._offset = 0
        self._closed = False
        self._lock = asyncio.Lock()

    async def write(self, data: bytes) -> None:
        """Sends ``data``; returns once the sandbox holds it (or the command has ended)."""
        async with self._lock:
            await self._started
            for at in range(0, len(data), STDIN_PIECE_BYTES):
                if self._closed:
                    return
                await self._send(data[at:at + STDIN_PIECE_BYTES], False)

    async def end(self) -> None:
        """Ends stdin: the command reads EOF after what was written."""
        async with self._lock:
            await self._started
            if not self._closed:
                await self._send(None, True)

    async def _send(self, piece: bytes | None, eof: bool) -> None:
        msg: dict[str, Any] = {"type": "stdin", "id": self.sandbox_id, "execId": self.exec_id, "offset": self._offset}
        if piece is not None:
            msg["data"] = piece
        if eof:
            msg["eof"] = True
        for _ in range(STDIN_MAX_WAITS):
            try:
                ack = await self.link.request(msg, STDIN_TIMEOUT_S, retry=True)
            except NotFoundError:
                self._closed = True  # it ended and its output was all read: like a closed pipe
                return
            except OverloadedError as err:
                await asyncio.sleep(min(1.0, max(0.001, (err.retry_after_ms or 20) / 1000)))
                continue
            if ack.get("closed"):
                self._closed = True
            else:
                self._offset += len(piece or b"")
            return
        raise OverloadedError("the command did not read its stdin", None, {"offset": self._offset})


class Process:
    """A running command from ``Sandbox.spawn``; ``async for chunk in proc`` reads its output."""

    def __init__(self, link: Link, sandbox_id: str, pump: ExecPump, started: "asyncio.Future[Any]", open_stdin: bool) -> None:
        self._link = link
        self._sandbox_id = sandbox_id
        self._pump = pump
        self._started = started
        self._stdin = StdinWriter(link, sandbox_id, pump.exec_id, started) if open_stdin else None

    @property
    def exec_id(self) -> str:
        """The client's id of the command (its start is idempotent by it)."""
        return self._pump.exec_id

    def __aiter__(self) -> AsyncIterator[Chunk]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[Chunk]:
        while True:
            chunk = await self._pump.next()
            if chunk is None:
                return
            yield chunk

    async def wait(self) -> ExecResult:
        """How the command ended (its output need not have been read)."""
        return await self._pump.wait()

    async def kill(self) -> None:
        """Kills the command (SIGKILL); ``wait()`` then says ``reason='killed'``."""
        await self._started_or_none()
        await self._link.request({"type": "exec-kill", "id": self._sandbox_id, "execId": self.exec_id}, 10.0, retry=True)

    async def write(self, data: bytes | str) -> None:
        """Writes to stdin (spawned with ``open_stdin=True``); returns when the sandbox holds the bytes."""
        await self._writer().write(data.encode() if isinstance(data, str) else bytes(data))

    async def close_stdin(self) -> None:
        """Ends stdin: the command reads EOF after what was written."""
        await self._writer().end()

    async def resize(self, cols: int, rows: int) -> None:
        """Gives a command spawned with ``pty`` a new terminal size (it gets SIGWINCH)."""
        await self._started_or_none()
        await self._link.request({"type": "exec-resize", "id": self._sandbox_id, "execId": self.exec_id,
                                  "cols": cols, "rows": rows}, 10.0, retry=True)

    async def _started_or_none(self) -> None:
        try:
            await self._started
        except WarrenError:
            pass  # the request below says why

    def _writer(self) -> StdinWriter:
        if self._stdin is None:
            raise invalid("open_stdin", "this command was spawned without open_stdin: its stdin was given up front")
        return self._stdin
