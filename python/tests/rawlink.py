"""A minimal warren link written from docs/protocol.md with nothing but websockets and msgpack.

The fixtures use it to mint tenant keys before (and without) the SDK, and the protocol smoke
test uses it to check the wire itself: if the SDK and this disagree, one of them is wrong.
"""
from __future__ import annotations

import asyncio
import itertools
from typing import Any

import msgpack
import websockets

PROTOCOL_VERSION = 1
# One WebSocket message is at most 8 MiB (src/transport/defaults.ts).
MAX_MESSAGE_BYTES = 8 * 1024 * 1024


class WireError(Exception):
    """An `error` frame: `err` is {code, message, details?}."""

    def __init__(self, err: dict[str, Any]) -> None:
        super().__init__(f"{err.get('code')}: {err.get('message')}")
        self.code: str = err.get("code", "")
        self.details: dict[str, Any] = err.get("details") or {}


def encode(frame: dict[str, Any]) -> bytes:
    """One frame as a plain msgpack map (binary data as bin, never ext types)."""
    return msgpack.packb(frame, use_bin_type=True)


def decode_all(message: bytes) -> list[dict[str, Any]]:
    """Every frame of one WebSocket message (frames may be back to back)."""
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=MAX_MESSAGE_BYTES)
    unpacker.feed(message)
    return list(unpacker)


class RawLink:
    """An authenticated socket that sends session requests one at a time and answers pings."""

    def __init__(self, ws: Any, welcome: dict[str, Any]) -> None:
        self.ws = ws
        self.welcome = welcome
        self._ids = itertools.count(1)

    @classmethod
    async def open(cls, url: str, token: str, v: int = PROTOCOL_VERSION, timeout: float = 10.0) -> "RawLink":
        """Connects and authenticates; raises WireError when the server refuses the auth."""
        ws = await asyncio.wait_for(websockets.connect(url, max_size=MAX_MESSAGE_BYTES), timeout)
        try:
            await ws.send(encode({"k": "auth", "token": token, "v": v}))
            frame = await asyncio.wait_for(cls._next_frame(ws), timeout)
        except BaseException:
            await ws.close()
            raise
        if frame.get("k") != "welcome":
            await ws.close()
            raise WireError(frame.get("err") or {"code": "unexpected", "message": repr(frame)})
        return cls(ws, frame)

    @staticmethod
    async def _next_frame(ws: Any) -> dict[str, Any]:
        while True:
            message = await ws.recv()
            if isinstance(message, str):
                raise AssertionError(f"the server sent a text message: {message!r}")
            frames = decode_all(message)
            if frames:
                return frames[0]

    async def request(self, m: dict[str, Any], timeout: float = 30.0) -> Any:
        """Sends `m` to the session and returns the reply's `m`; an `error` raises WireError."""
        rid = next(self._ids)
        await self.ws.send(encode({"k": "request", "id": rid, "to": "session", "m": m, "t": int(timeout * 1000)}))

        async def answer() -> Any:
            while True:
                message = await self.ws.recv()
                for frame in decode_all(message):
                    kind = frame.get("k")
                    if kind == "ping":
                        await self.ws.send(encode({"k": "pong"}))
                    elif kind == "reply" and frame.get("id") == rid:
                        return frame.get("m")
                    elif kind == "error" and frame.get("id") in (rid, None):
                        raise WireError(frame.get("err") or {})
                    elif kind == "bye":
                        raise WireError(frame.get("err") or {"code": "WARREN_ERR_CONNECTION_CLOSED", "message": "bye"})

        return await asyncio.wait_for(answer(), timeout)

    async def close(self) -> None:
        """Closes the socket (the session lingers on the server and then ends)."""
        await self.ws.close()


async def mint_key(url: str, admin_token: str, tenant: str, scopes: list[str]) -> str:
    """A new API key for `tenant`, made with the admin key (`token-create`)."""
    link = await RawLink.open(url, admin_token)
    try:
        key = await link.request({"type": "token-create", "tenant": tenant, "scopes": scopes})
    finally:
        await link.close()
    assert isinstance(key, str), key
    return key
