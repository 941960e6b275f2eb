"""Fixtures for the Python SDK's tests, all against one real `warren up` per test session.

- `cluster`: the running cluster (url, tenant `token`, `admin_token`, `data_dir`, `key()`, `env()`).
- `client`: a `warren.Client` with the tenant key, closed after the test.
- `async_client`: a `warren.AsyncClient` for `async def` tests, connected inside the test's own
  event loop and closed after it.

pytest-asyncio and pytest-timeout are not available (Debian's python3-pytest alone), so this file
runs `async def` tests itself, and gives every test a deadline: `@pytest.mark.deadline(seconds)`,
60 s unless marked. An async test is cancelled at its deadline; a sync one is interrupted by
SIGALRM a little after it.
"""
from __future__ import annotations

import asyncio
import inspect
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from cluster import Cluster, start_cluster, stop_cluster

DEFAULT_DEADLINE_S = 60.0
# A sync test's SIGALRM comes this much after an async test's own cancellation would.
ALARM_GRACE_S = 5.0


class TestDeadline(Exception):
    """A sync test outlived its deadline."""

    __test__ = False  # not a test class, despite the name


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "deadline(seconds): fail the test when it runs longer than this")


def deadline_of(item: pytest.Item) -> float:
    marker = item.get_closest_marker("deadline")
    return float(marker.args[0]) if marker is not None else DEFAULT_DEADLINE_S


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    seconds = deadline_of(item)

    def expire(signum: int, frame: Any) -> None:
        raise TestDeadline(f"{item.nodeid} ran past its deadline of {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds + ALARM_GRACE_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass(frozen=True)
class AsyncClientSlot:
    """Stands for an AsyncClient until the test's event loop exists to connect it in."""

    url: str
    token: str


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}
    asyncio.run(run_async_test(pyfuncitem.obj, kwargs, deadline_of(pyfuncitem)))
    return True


async def run_async_test(fn: Any, kwargs: dict[str, Any], seconds: float) -> None:
    opened: list[Any] = []
    try:
        for name, value in kwargs.items():
            if isinstance(value, AsyncClientSlot):
                import warren

                kwargs[name] = await asyncio.wait_for(warren.AsyncClient.connect(url=value.url, token=value.token), 30)
                opened.append(kwargs[name])
        try:
            await asyncio.wait_for(fn(**kwargs), seconds)
        except asyncio.TimeoutError:
            raise TestDeadline(f"{fn.__name__} ran past its deadline of {seconds:g} s") from None
    finally:
        for c in opened:
            await asyncio.wait_for(c.close(), 30)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """One `warren up` for the whole test session."""
    c = start_cluster()
    try:
        yield c
    finally:
        stop_cluster(c)


@pytest.fixture
def client(cluster: Cluster) -> Iterator[Any]:
    """A sync client with the tenant key."""
    import warren

    c = warren.Client.connect(url=cluster.url, token=cluster.token)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def async_client(cluster: Cluster) -> AsyncClientSlot:
    """An AsyncClient with the tenant key (async tests only: it is connected in the test's loop)."""
    return AsyncClientSlot(cluster.url, cluster.token)
