"""The link: msgpack frames over one WebSocket (docs/protocol.md, "Link").

It authenticates with protocol version 1, matches replies to requests by id, hands tells to a
callback, answers pings and sends its own when the peer is quiet, and reconnects on its own with
backoff and jitter (100 ms doubling to 10 s, +-50 %), resuming the session. Requests in flight
when a socket drops fail with ConnectionClosedError; ``request(..., retry=True)`` sends an
idempotent request again once the link is back.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from dataclasses import dataclass
from typing import Any, Callable

import msgpack
import websockets
import websockets.exceptions

from .tls import CaInput, ssl_context, tls_refusal

from .errors import (ConnectionClosedError, FrameTooLargeError, OverloadedError, QuotaError, RETRYABLE_CODES,
                     UnauthenticatedError, WarrenError, WarrenTimeoutError, from_wire)

PROTOCOL_VERSION = 1
SESSION_ADDRESS = "session"
CLIENT_ADDRESS = "client"


@dataclass(frozen=True)
class LinkDefaults:
    """The link's bounds; the protocol's own limits are the first three."""

    max_frame_bytes: int = 1024 * 1024
    max_message_bytes: int = 8 * 1024 * 1024
    max_in_flight: int = 4096
    auth_timeout_s: float = 10.0
    ping_after_s: float = 5.0
    dead_after_s: float = 15.0
    backoff_min_s: float = 0.1
    backoff_max_s: float = 10.0
    backoff_jitter: float = 0.5
    request_timeout_s: float = 30.0
    max_retries: int = 30
    #: How long a request the tenant's request or creation rate refused is sent again, each time
    #: after its ``retry_after_ms`` (it was not handled, so any request may be); 0 raises at once.
    rate_limit_wait_s: float = 30.0


DEFAULTS = LinkDefaults()

TellHandler = Callable[[str, Any], None]


def rate_limit_pause(err: WarrenError) -> float | None:
    """Seconds to wait before sending again a request the tenant's request or creation rate refused
    (its ``retry_after_ms`` and up to a fifth more, so requests refused together do not return
    together); None for any other error."""
    if not isinstance(err, QuotaError) or err.details.get("quota") not in ("requests", "rate"):
        return None
    hint = err.details.get("retryAfterMs")
    ms = float(hint) if isinstance(hint, (int, float)) and hint > 0 else 100.0
    return ms * (1 + random.random() / 5) / 1000


def backoff_delay(attempt: int, d: LinkDefaults = DEFAULTS) -> float:
    """Delay before reconnect ``attempt`` (0-based): doubling from the minimum to the maximum, +-jitter."""
    base = min(d.backoff_max_s, d.backoff_min_s * (2 ** min(attempt, 30)))
    return base * (1 + random.uniform(-d.backoff_jitter, d.backoff_jitter))


def encode(frame: dict[str, Any], d: LinkDefaults = DEFAULTS) -> bytes:
    """Packs one frame; refuses one over the protocol's frame limit before it is sent."""
    data: bytes = msgpack.packb(frame, use_bin_type=True)
    if len(data) > d.max_frame_bytes:
        raise FrameTooLargeError(f"{frame.get('k')} frame of {len(data)} bytes exceeds the limit of {d.max_frame_bytes}",
                                 None, {"size": len(data), "limit": d.max_frame_bytes})
    return data


def decode(message: bytes) -> list[Any]:
    """The frames of one WebSocket message (msgpack values back to back)."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=len(message) + 1)
    unpacker.feed(message)
    return list(unpacker)


class Link:
    """One reconnecting, authenticated WebSocket to a control plane."""

    def __init__(self, url: str, token: str, on_tell: TellHandler | None = None, defaults: LinkDefaults = DEFAULTS,
                 ca: CaInput = None) -> None:
        self.url = url
        # Made once: a bad CA file is refused here, before any dial.
        self._ssl = ssl_context(url, ca)
        self._token = token
        self._on_tell = on_tell
        self.d = defaults
        self._ws: Any = None
        self._session: str | None = None
        self._open = asyncio.Event()
        self._fatal: WarrenError | None = None
        self._closed = False
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._slots = asyncio.Semaphore(defaults.max_in_flight)
        self._runner: asyncio.Task[None] | None = None
        self._last_heard = time.monotonic()
        self._last_sent = time.monotonic()
        #: Counts welcomes; a caller compares it to learn a reconnect happened.
        self.generation = 0

    @property
    def closed(self) -> bool:
        """True once closed by the caller or refused for good (bad token, bye)."""
        return self._closed

    async def connect(self, timeout_s: float = 10.0) -> None:
        """Connects and authenticates; retries with backoff until ``timeout_s``.

        Raises UnauthenticatedError / ProtocolVersionError at once (retrying cannot fix them),
        ConnectionClosedError when the cluster could not be reached in time.
        """
        self._runner = asyncio.create_task(self._run())
        try:
            await self.wait_open(timeout_s)
        except BaseException:
            await self.close()
            raise

    async def wait_open(self, timeout_s: float) -> None:
        """Waits until the link is authenticated; raises when it closed for good or ``timeout_s`` passed."""
        if self._open.is_set():
            return
        if self._closed:
            raise self._fatal or ConnectionClosedError("the client was closed")
        opened = asyncio.ensure_future(self._open.wait())
        done = asyncio.ensure_future(self._runner) if self._runner else None
        waits: set[asyncio.Future[Any]] = {opened} | ({done} if done else set())
        try:
            await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            opened.cancel()
        if self._open.is_set():
            return
        if self._closed:
            raise self._fatal or ConnectionClosedError("the client was closed")
        raise ConnectionClosedError(f"could not reach {self.url} within {timeout_s:g} s", None, {"timeoutMs": int(timeout_s * 1000)})

    async def request(self, message: Any, timeout_s: float | None = None, retry: bool = False) -> Any:
        """Sends ``message`` to the session and returns its reply.

        With ``retry`` (idempotent requests only) a request lost with its socket, answered too
        late or refused as overloaded is sent again, up to ``max_retries`` times.
        """
        timeout = self.d.request_timeout_s if timeout_s is None else timeout_s
        failures = 0
        wait_until = time.monotonic() + self.d.rate_limit_wait_s
        while True:
            try:
                return await self._ask(message, timeout)
            except WarrenError as err:
                pause = rate_limit_pause(err)
                if pause is not None and not self._closed and time.monotonic() + pause <= wait_until:
                    await asyncio.sleep(pause)
                    continue
                again = retry and not self._closed and (err.code in RETRYABLE_CODES or isinstance(err, OverloadedError))
                failures += 1
                if not again or failures > self.d.max_retries:
                    raise
                hint = err.retry_after_ms if isinstance(err, OverloadedError) else None
                await asyncio.sleep(min(1.0, (hint / 1000) if hint is not None else 0.05 * failures))

    async def _ask(self, message: Any, timeout_s: float) -> Any:
        deadline = time.monotonic() + timeout_s
        async with self._slots:
            await self.wait_open(max(0.0, deadline - time.monotonic()))
            rid = next(self._ids)
            frame = encode({"k": "request", "id": rid, "to": SESSION_ADDRESS, "m": message, "t": int(timeout_s * 1000)}, self.d)
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._pending[rid] = fut
            try:
                await self._send_bytes(frame)
                return await asyncio.wait_for(fut, max(0.001, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                kind = message.get("type") if isinstance(message, dict) else None
                raise WarrenTimeoutError(f"the control plane at {self.url} did not answer the {kind} request within "
                                         f"{int(timeout_s * 1000)} ms", None, {"timeoutMs": int(timeout_s * 1000)}) from None
            finally:
                self._pending.pop(rid, None)

    async def _send_bytes(self, data: bytes) -> None:
        ws = self._ws
        if ws is None:
            raise ConnectionClosedError("the socket closed before the request was sent")
        try:
            await ws.send(data)
        except websockets.exceptions.ConnectionClosed:
            raise ConnectionClosedError("the socket closed before the request was sent") from None
        self._last_sent = time.monotonic()

    async def close(self) -> None:
        """Closes the link for good; requests in flight fail with ConnectionClosedError."""
        self._closed = True
        ws = self._ws
        if ws is not None:
            with contextlib.suppress(Exception):
                await ws.close()
        if self._runner is not None and self._runner is not asyncio.current_task():
            self._runner.cancel()
            with contextlib.suppress(BaseException):
                await self._runner
        self._fail_pending(ConnectionClosedError("the client was closed"))

    def drop_socket(self) -> None:
        """Closes the current socket without closing the link (it reconnects): what a network fault does."""
        ws = self._ws
        if ws is not None and getattr(ws, "transport", None) is not None:
            ws.transport.abort()  # no close handshake: the peer sees the connection vanish

    # -- the socket's life --------------------------------------------------------------

    async def _run(self) -> None:
        attempt = 0
        while not self._closed:
            try:
                ws = await websockets.connect(self.url, max_size=self.d.max_message_bytes, ping_interval=None,
                                              open_timeout=self.d.auth_timeout_s, close_timeout=1,
                                              **({"ssl": self._ssl} if self._ssl is not None else {}))
            except (OSError, asyncio.TimeoutError, websockets.exceptions.WebSocketException) as exc:
                # An untrusted certificate stays untrusted: the link ends with why, not retried.
                refused = tls_refusal(exc, self.url)
                if refused is not None:
                    self._fatal = refused
                    self._closed = True
                    self._fail_pending(refused)
                    return
                await asyncio.sleep(backoff_delay(attempt, self.d))
                attempt += 1
                continue
            try:
                await self._handshake(ws)
            except WarrenError as err:
                with contextlib.suppress(Exception):
                    await ws.close()
                if err.code in ("WARREN_ERR_UNAUTHENTICATED", "WARREN_ERR_PROTOCOL_VERSION"):
                    self._fatal = err
                    self._closed = True
                    self._fail_pending(err)
                    return
                await asyncio.sleep(backoff_delay(attempt, self.d))
                attempt += 1
                continue
            attempt = 0
            await self._serve(ws)
            if not self._closed:
                await asyncio.sleep(backoff_delay(0, self.d))

    async def _handshake(self, ws: Any) -> None:
        auth: dict[str, Any] = {"k": "auth", "token": self._token, "v": PROTOCOL_VERSION}
        if self._session is not None:
            auth["session"] = self._session
        try:
            await ws.send(encode(auth, self.d))
            while True:
                raw = await asyncio.wait_for(ws.recv(), self.d.auth_timeout_s)
                if isinstance(raw, str):
                    continue
                for f in decode(raw):
                    if not isinstance(f, dict):
                        continue
                    if f.get("k") == "welcome":
                        self._session = str(f.get("session"))
                        return
                    if f.get("k") == "error":
                        raise from_wire(f.get("err"))
        except websockets.exceptions.ConnectionClosed as closed:
            if closed.code == 4401:
                raise UnauthenticatedError("the token was refused") from None
            raise ConnectionClosedError(f"handshake socket closed (code {closed.code})") from None
        except asyncio.TimeoutError:
            raise ConnectionClosedError("no welcome within the handshake timeout") from None

    async def _serve(self, ws: Any) -> None:
        self._ws = ws
        self._last_heard = self._last_sent = time.monotonic()
        self.generation += 1
        self._open.set()
        beat = asyncio.create_task(self._heartbeat(ws))
        try:
            async for raw in ws:
                self._last_heard = time.monotonic()
                if isinstance(raw, str):
                    continue
                try:
                    frames = decode(raw)
                except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
                    continue
                for f in frames:
                    if isinstance(f, dict):
                        await self._dispatch(ws, f)
        except websockets.exceptions.ConnectionClosed:
            pass
        finally:
            beat.cancel()
            self._open.clear()
            self._ws = None
            self._fail_pending(ConnectionClosedError("the socket closed before the answer came"))

    async def _dispatch(self, ws: Any, f: dict[str, Any]) -> None:
        k = f.get("k")
        if k == "reply" or (k == "error" and "id" in f):
            fut = self._pending.get(f.get("id"))  # type: ignore[arg-type]
            if fut is not None and not fut.done():
                if k == "reply":
                    fut.set_result(f.get("m"))
                else:
                    fut.set_exception(from_wire(f.get("err")))
        elif k == "tell":
            if self._on_tell is not None:
                try:
                    self._on_tell(str(f.get("to")), f.get("m"))
                except Exception:  # a handler's bug must not end the link
                    pass
        elif k == "ping":
            with contextlib.suppress(Exception):
                await ws.send(encode({"k": "pong"}, self.d))
        elif k == "bye":
            err = f.get("err")
            self._fatal = from_wire(err) if err is not None else ConnectionClosedError("the session ended (bye)")
            self._closed = True
            await ws.close()

    async def _heartbeat(self, ws: Any) -> None:
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            if now - self._last_heard > self.d.dead_after_s:
                ws.transport.abort()
                return
            if now - self._last_heard > self.d.ping_after_s and now - self._last_sent > 1.0:
                with contextlib.suppress(Exception):
                    await ws.send(encode({"k": "ping"}, self.d))
                    self._last_sent = now

    def _fail_pending(self, err: WarrenError) -> None:
        for fut in list(self._pending.values()):
            if not fut.done():
                # One instance per waiter: a shared exception would chain their tracebacks.
                fut.set_exception(type(err)(err.message, err.code, err.details))
        self._pending.clear()
