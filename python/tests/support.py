"""Helpers for the SDK's tests: every test body runs under its own timeout, against a real cluster."""
from __future__ import annotations

import asyncio
import secrets
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
