"""One command's output on the client's side.

The pump pulls pages by sequence number, asking for the next page only while fewer than
``high_water_bytes`` wait unread (the consumer's credit); while the buffer is full it sends status
reads (``maxBytes: 0``) so ``wait()`` learns the end however slowly output is read. After a
dropped socket it asks again from the first seq it has not taken, so no chunk is lost or repeated.
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from .errors import WarrenError
from .link import Link

Stream = Literal["stdout", "stderr"]


@dataclass(frozen=True)
class ExecDefaults:
    high_water_bytes: int = 4 * 1024 * 1024
    read_wait_ms: int = 2000
    margin_s: float = 5.0
    start_retries: int = 5
    #: How long pulls wait for a sandbox whose node is away (WARREN_ERR_BACKEND_UNAVAILABLE with
    #: retryAfterMs: a node agent restarting, a control plane rebuilding its directory); the
    #: command runs on meanwhile and its output resumes from the last seq.
    away_wait_s: float = 120.0


EXEC_DEFAULTS = ExecDefaults()


@dataclass(frozen=True)
class Chunk:
    """A piece of a command's output."""

    stream: Stream
    data: bytes


@dataclass(frozen=True)
class ExecResult:
    """How a command ended (``reason``: ``timeout``, ``killed``, ``crashed``, ``oom`` or None)."""

    exit_code: int
    duration_ms: int
    truncated: bool = False
    reason: str | None = None
    message: str | None = None

    @staticmethod
    def from_wire(r: dict[str, Any]) -> "ExecResult":
        return ExecResult(int(r.get("exitCode", -1)), int(r.get("durationMs", 0)), bool(r.get("truncated", False)),
                          r.get("reason"), r.get("message"))


@dataclass(frozen=True)
class CommandResult(ExecResult):
    """What ``exec`` returns: the end of the command and its output as UTF-8 text."""

    stdout: str = ""
    stderr: str = ""
    stdout_bytes: bytes = field(default=b"", repr=False)
    stderr_bytes: bytes = field(default=b"", repr=False)


class ExecPump:
    """Pulls one command's pages and hands out its chunks in order."""

    def __init__(self, link: Link, sandbox_id: str, exec_id: str, on_chunk: Callable[[Chunk], None] | None = None,
                 defaults: ExecDefaults = EXEC_DEFAULTS) -> None:
        self.link = link
        self.sandbox_id = sandbox_id
        self.exec_id = exec_id
        self.d = defaults
        self._on_chunk = on_chunk
        self._next_seq = 0
        self._buffer: collections.deque[Chunk] = collections.deque()
        self._buffered = 0
        self._result: ExecResult | None = None  # set once every chunk has arrived
        self._ended: asyncio.Future[ExecResult] = asyncio.get_running_loop().create_future()
        self._error: BaseException | None = None
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self, first: dict[str, Any]) -> None:
        """Takes the first page (the exec's answer) and starts pulling the rest."""
        self._accept(first)
        self._task = asyncio.create_task(self._pull())

    def abort(self, err: BaseException) -> None:
        """Fails the pump: ``wait()`` and iteration raise ``err``."""
        if self._result is not None or self._error is not None:
            return
        self._error = err
        if not self._ended.done():
            self._ended.set_exception(err)
            self._ended.exception()  # marks it retrieved: nobody may be waiting
        self._wake.set()

    async def wait(self) -> ExecResult:
        """How the command ended, whether or not its output has been read."""
        return await asyncio.shield(self._ended)

    async def next(self) -> Chunk | None:
        """The next chunk, or None at the end."""
        while True:
            if self._buffer:
                chunk = self._buffer.popleft()
                self._buffered -= len(chunk.data)
                if self._buffered < self.d.high_water_bytes:
                    self._room.set()
                return chunk
            if self._error is not None:
                raise self._error
            if self._result is not None:
                return None
            self._wake.clear()
            await self._wake.wait()

    def close(self) -> None:
        """Stops pulling (the client is closing)."""
        if self._task is not None:
            self._task.cancel()

    def _full(self) -> bool:
        return self._buffered >= self.d.high_water_bytes

    def _accept(self, page: dict[str, Any]) -> None:
        for c in page.get("chunks") or []:
            if c.get("seq") != self._next_seq:
                continue  # a page answered twice after a reconnect: keep the first copy
            self._next_seq += 1
            chunk = Chunk(c.get("stream", "stdout"), bytes(c.get("data") or b""))
            if self._on_chunk is not None:
                try:
                    self._on_chunk(chunk)
                except BaseException as err:  # the caller's callback failed: so does the command's wait
                    self.abort(err)
                    return
            else:
                self._buffer.append(chunk)
                self._buffered += len(chunk.data)
        result, ended = page.get("result"), page.get("ended")
        if result is not None and int(page.get("nextSeq", 0)) <= self._next_seq:
            self._result = ExecResult.from_wire(result)
            self._end(self._result)
        elif ended is not None:
            self._end(ExecResult.from_wire(ended))  # ended with output left on the node
        self._wake.set()

    def _end(self, r: ExecResult) -> None:
        if not self._ended.done():
            self._ended.set_result(r)

    async def _pull(self) -> None:
        away_since: float | None = None
        try:
            while self._result is None and self._error is None:
                full = self._full()
                if full and self._ended.done():
                    self._room.clear()
                    await self._room.wait()  # nothing left to learn until the consumer reads
                    continue
                msg: dict[str, Any] = {"type": "read", "id": self.sandbox_id, "execId": self.exec_id,
                                       "fromSeq": self._next_seq, "waitMs": self.d.read_wait_ms}
                if full:
                    msg["maxBytes"] = 0
                ask = asyncio.ensure_future(self.link.request(msg, self.d.read_wait_ms / 1000 + self.d.margin_s, retry=True))
                if full:
                    # Room freed during a status read: chunks may be taken again, ask for them.
                    self._room.clear()
                    room = asyncio.ensure_future(self._room.wait())
                    await asyncio.wait({ask, room}, return_when=asyncio.FIRST_COMPLETED)
                    room.cancel()
                    if not ask.done():
                        ask.cancel()
                        with contextlib.suppress(BaseException):
                            await ask
                        continue
                try:
                    page = await ask
                except WarrenError as err:
                    pause = _away_pause(err)
                    now = asyncio.get_running_loop().time()
                    if pause is None or now - (away_since if away_since is not None else now) >= self.d.away_wait_s:
                        raise
                    away_since = away_since if away_since is not None else now
                    await asyncio.sleep(pause)
                    continue
                away_since = None
                self._accept(page)
        except asyncio.CancelledError:
            raise
        except WarrenError as err:
            self.abort(err)
        except Exception as err:  # a bug must reach wait(), not vanish in a task
            self.abort(err)


def _away_pause(err: WarrenError) -> float | None:
    """The pause (s) a read answered "the sandbox's node is away, ask again" asks for, else None."""
    hint = err.details.get("retryAfterMs") if err.code == "WARREN_ERR_BACKEND_UNAVAILABLE" else None
    return min(1.0, max(0.001, float(hint) / 1000)) if isinstance(hint, (int, float)) else None
