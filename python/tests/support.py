"""Helpers for the SDK's tests: every test body runs under its own timeout, against a real cluster."""
from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any, Awaitable, Callable, TypeVar

import warren

T = TypeVar("T")


def run(body: Callable[[], Awaitable[T]], timeout_s: float = 60.0) -> T:
    """Runs an async test body with a timeout (pytest here has no timeout plugin)."""
    async def bounded() -> T:
        return await asyncio.wait_for(body(), timeout_s)
    return asyncio.run(bounded())


async def connect(cluster: Any, token: str | None = None) -> warren.AsyncClient:
    return await warren.AsyncClient.connect(cluster.url, token or cluster.token)


def label() -> dict[str, str]:
    """A label unique to one test, so kills by label touch only its own sandboxes."""
    return {"test": secrets.token_hex(6)}


COMPLETE_WAIT_S = 15.0


async def completed(c: warren.AsyncClient, sid: str) -> list[warren.Step]:
    """Every step of an ended sandbox, once its trajectory is complete (its node ships the last steps
    as it ends)."""
    deadline = time.monotonic() + COMPLETE_WAIT_S
    while not (await c.trajectory(sid, limit=1)).complete:
        assert time.monotonic() < deadline, f"the trajectory of {sid} was not complete within {COMPLETE_WAIT_S} s"
        await asyncio.sleep(0.1)
    return [s async for s in c.steps(sid)]


def completed_sync(c: warren.Client, sid: str) -> None:
    """``completed`` for the sync client: returns once the trajectory of ended sandbox ``sid`` is complete."""
    deadline = time.monotonic() + COMPLETE_WAIT_S
    while not c.trajectory(sid, limit=1).complete:
        assert time.monotonic() < deadline, f"the trajectory of {sid} was not complete within {COMPLETE_WAIT_S} s"
        time.sleep(0.1)
