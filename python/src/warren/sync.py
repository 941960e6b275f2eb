"""The sync twin of the async client: the same calls, as plain methods.

A ``Client`` runs its ``AsyncClient`` on a private event loop in a daemon thread and waits for
each call there (as E2B pairs ``Sandbox`` with ``AsyncSandbox``). Callbacks (``on_stdout``) run
on that thread.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Callable, Iterator, Mapping, Sequence, TypeVar, Union

from .admin import KeyView
from .client import AsyncClient
from .exec import Chunk, CommandResult, ExecResult
from .files import FileInfo, FileStat, SandboxFiles, WriteInfo
from .process import Process
from .sandbox import Command, Sandbox, SandboxRef
from .session import MAX_OUTPUT_BYTES, ShellSession
from .replay import ReplayResult, RestoreResult
from .snapshots import ForkResult
from .trajectory import RecordedBytes, Step, TrajectoryPage
from .views import KillOutcome, SandboxView, SnapshotView

T = TypeVar("T")


class _LoopThread:
    """An event loop on a daemon thread; ``run`` waits for a coroutine there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="warren-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Awaitable[T]) -> T:
        if threading.current_thread() is self.thread:
            raise RuntimeError("a sync warren call from inside its own callback would deadlock")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()  # type: ignore[arg-type]

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        if not self.thread.is_alive():
            self.loop.close()


class SyncFiles:
    """``sandbox.files`` for the sync client."""

    def __init__(self, lt: _LoopThread, files: SandboxFiles) -> None:
        self._lt, self._f = lt, files

    def read(self, path: str) -> bytes:
        return self._lt.run(self._f.read(path))

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self._lt.run(self._f.read_text(path, encoding))

    def write(self, path: str, data: Any, *, mode: int | None = None) -> WriteInfo:
        return self._lt.run(self._f.write(path, data, mode=mode))

    def list(self, path: str) -> list[FileInfo]:
        return self._lt.run(self._f.list(path))

    def stat(self, path: str, *, follow: bool = False) -> FileStat:
        return self._lt.run(self._f.stat(path, follow=follow))

    def exists(self, path: str) -> bool:
        return self._lt.run(self._f.exists(path))

    def mkdir(self, path: str, *, parents: bool = False, mode: int | None = None) -> None:
        self._lt.run(self._f.mkdir(path, parents=parents, mode=mode))

    def remove(self, path: str, *, recursive: bool = False) -> None:
        self._lt.run(self._f.remove(path, recursive=recursive))

    def rename(self, src: str, dst: str) -> None:
        self._lt.run(self._f.rename(src, dst))

    def upload(self, local_path: str, sandbox_path: str) -> WriteInfo:
        return self._lt.run(self._f.upload(local_path, sandbox_path))

    def download(self, sandbox_path: str, local_path: str) -> None:
        self._lt.run(self._f.download(sandbox_path, local_path))


class SyncProcess:
    """A spawned command for the sync client: ``for chunk in proc`` reads its output."""

    def __init__(self, lt: _LoopThread, proc: Process) -> None:
        self._lt, self._p = lt, proc

    @property
    def exec_id(self) -> str:
        return self._p.exec_id

    def __iter__(self) -> Iterator[Chunk]:
        while True:
            chunk = self._lt.run(self._p._pump.next())
            if chunk is None:
                return
            yield chunk

    def wait(self) -> ExecResult:
        return self._lt.run(self._p.wait())

    def kill(self) -> None:
        self._lt.run(self._p.kill())

    def write(self, data: bytes | str) -> None:
        self._lt.run(self._p.write(data))

    def close_stdin(self) -> None:
        self._lt.run(self._p.close_stdin())

    def resize(self, cols: int, rows: int) -> None:
        self._lt.run(self._p.resize(cols, rows))


class SyncSession:
    """A persistent shell for the sync client."""

    def __init__(self, lt: _LoopThread, s: ShellSession) -> None:
        self._lt, self._s = lt, s

    @property
    def closed(self) -> bool:
        return self._s.closed

    def run(self, command: str, *, timeout_ms: int | None = None, max_output_bytes: int = MAX_OUTPUT_BYTES) -> CommandResult:
        return self._lt.run(self._s.run(command, timeout_ms=timeout_ms, max_output_bytes=max_output_bytes))

    def close(self) -> None:
        self._lt.run(self._s.close())

    def __enter__(self) -> "SyncSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncSandbox:
    """A sandbox for the sync client: the async ``Sandbox``'s calls as plain methods."""

    def __init__(self, lt: _LoopThread, sb: Sandbox) -> None:
        self._lt, self._sb = lt, sb
        self.files = SyncFiles(lt, sb.files)

    id = property(lambda self: self._sb.id)
    url = property(lambda self: self._sb.url)
    state = property(lambda self: self._sb.state)
    labels = property(lambda self: self._sb.labels)
    view = property(lambda self: self._sb.view)

    def __repr__(self) -> str:
        return f"SyncSandbox(id={self.id!r}, state={self.state!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (SandboxRef, (self.id, self.url))

    def info(self) -> SandboxView:
        return self._lt.run(self._sb.info())

    def exec(self, command: Command, **opts: Any) -> CommandResult:
        """As ``Sandbox.exec`` (cwd, user, env, stdin, timeout_ms, max_output_bytes, on_stdout, on_stderr)."""
        return self._lt.run(self._sb.exec(command, **opts))

    def spawn(self, command: Command, **opts: Any) -> SyncProcess:
        """As ``Sandbox.spawn``."""
        async def start() -> Process:
            return self._sb.spawn(command, **opts)  # the pump needs the loop's thread
        return SyncProcess(self._lt, self._lt.run(start()))

    def session(self, **opts: Any) -> SyncSession:
        return SyncSession(self._lt, self._lt.run(self._sb.session(**opts)))

    def trajectory(self, from_seq: int | None = None, limit: int | None = None) -> TrajectoryPage:
        return self._lt.run(self._sb.trajectory(from_seq, limit))

    def kill(self) -> None:
        self._lt.run(self._sb.kill())

    def set_ttl(self, ms: int) -> int:
        return self._lt.run(self._sb.set_ttl(ms))

    def pause(self) -> SandboxView:
        """As ``Sandbox.pause``."""
        return self._lt.run(self._sb.pause())

    def resume(self) -> SandboxView:
        """As ``Sandbox.resume`` (a hibernated sandbox too)."""
        return self._lt.run(self._sb.resume())

    def snapshot(self, name: str | None = None, *, memory: bool = False) -> SnapshotView:
        """As ``Sandbox.snapshot``."""
        return self._lt.run(self._sb.snapshot(name, memory=memory))

    def fork(self, n: int, spec: Mapping[str, Any] | None = None, **opts: Any) -> "ForkResult[SyncSandbox]":
        """As ``Sandbox.fork``; the forks are sync handles."""
        r = self._lt.run(self._sb.fork(n, spec, **opts))
        return r.map(lambda sb: SyncSandbox(self._lt, sb))

    def hibernate(self) -> SandboxView:
        """As ``Sandbox.hibernate``."""
        return self._lt.run(self._sb.hibernate())


class Client:
    """The sync client: ``with warren.Client.connect() as c: sb = c.create(); sb.exec("ls")``."""

    def __init__(self, lt: _LoopThread, client: AsyncClient) -> None:
        self._lt, self._c = lt, client
        self._closed = False

    @classmethod
    def connect(cls, url: str | None = None, token: str | None = None, **kw: Any) -> "Client":
        """Connects (same arguments as ``AsyncClient.connect``)."""
        lt = _LoopThread()
        try:
            return cls(lt, lt.run(AsyncClient.connect(url, token, **kw)))
        except BaseException:
            lt.stop()
            raise

    url = property(lambda self: self._c.url)

    @property
    def async_client(self) -> AsyncClient:
        """The async client underneath (its calls must run on this client's loop)."""
        return self._c

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._lt.run(self._c.close())
        finally:
            self._lt.stop()

    def request(self, message: Mapping[str, Any], timeout_s: float | None = None, retry: bool = False) -> Any:
        return self._lt.run(self._c.request(message, timeout_s, retry))

    def create(self, **spec: Any) -> SyncSandbox:
        return SyncSandbox(self._lt, self._lt.run(self._c.create(**spec)))

    def create_many(self, n: int, **spec: Any) -> list[SyncSandbox]:
        return [SyncSandbox(self._lt, s) for s in self._lt.run(self._c.create_many(n, **spec))]

    def attach(self, target: Union[str, SandboxRef, Sandbox, SyncSandbox]) -> SyncSandbox:
        sid = target if isinstance(target, str) else target.id
        return SyncSandbox(self._lt, self._lt.run(self._c.attach(sid)))

    def list(self, **filters: Any) -> list[SandboxView]:
        return self._lt.run(self._c.list(**filters))

    def kill(self, ids: Sequence[Union[str, Sandbox, SyncSandbox]] | str | None = None, *,
             labels: Mapping[str, str] | None = None) -> list[KillOutcome]:
        if isinstance(ids, (str, SyncSandbox)):
            ids = [ids]
        plain = None if ids is None else [i if isinstance(i, str) else i.id for i in ids]
        return self._lt.run(self._c.kill(plain, labels=labels))

    def snapshots(self, *, sandbox_id: str | None = None, limit: int | None = None) -> list[SnapshotView]:
        return self._lt.run(self._c.snapshots(sandbox_id=sandbox_id, limit=limit))

    def delete_snapshot(self, id_or_name: str) -> str:
        return self._lt.run(self._c.delete_snapshot(id_or_name))

    def trajectory(self, id: str, *, from_seq: int | None = None, limit: int | None = None) -> TrajectoryPage:
        return self._lt.run(self._c.trajectory(id, from_seq=from_seq, limit=limit))

    def steps(self, id: str) -> Iterator[Step]:
        """Every step recorded so far, in order: ``for s in client.steps(id)`` (a page at a time)."""
        pages = self._c.steps(id)
        try:
            while True:
                try:
                    step = self._lt.run(pages.__anext__())
                except StopAsyncIteration:
                    return
                yield step
        finally:
            self._lt.run(pages.aclose())  # type: ignore[attr-defined]

    def trajectory_blob(self, id: str, digest: str, size: int | None = None) -> bytes:
        return self._lt.run(self._c.trajectory_blob(id, digest, size))

    def recorded(self, id: str, r: RecordedBytes) -> bytes | None:
        return self._lt.run(self._c.recorded(id, r))

    def replay(self, id: str, **opts: Any) -> "ReplayResult[SyncSandbox]":
        """As ``AsyncClient.replay`` (``up_to``, ``compare``, ``spec``); the sandbox is a sync handle."""
        return self._lt.run(self._c.replay(id, **opts)).map(lambda sb: SyncSandbox(self._lt, sb))

    def restore(self, id: str) -> "RestoreResult[SyncSandbox]":
        """As ``AsyncClient.restore``; the sandbox is a sync handle."""
        return self._lt.run(self._c.restore(id)).map(lambda sb: SyncSandbox(self._lt, sb))

    def create_token(self, tenant: str, scopes: Sequence[str], *, expires_in_ms: int | None = None) -> str:
        return self._lt.run(self._c.create_token(tenant, scopes, expires_in_ms=expires_in_ms))

    def tokens(self, tenant: str | None = None) -> "list[KeyView]":
        return self._lt.run(self._c.tokens(tenant))

    def revoke_token(self, id: str) -> dict[str, Any]:
        return self._lt.run(self._c.revoke_token(id))

    def rotate_admin_key(self) -> str:
        return self._lt.run(self._c.rotate_admin_key())

    def quotas(self, tenant: str, **quotas: Any) -> dict[str, Any]:
        return self._lt.run(self._c.quotas(tenant, **quotas))

    def set_quotas(self, tenant: str, *, max_sandboxes: int | None = None, creates_per_second: float | None = None,
                   create_burst: float | None = None, requests_per_second: float | None = None,
                   request_burst: float | None = None, trajectory_bytes: int | None = None) -> dict[str, Any]:
        return self._lt.run(self._c.set_quotas(tenant, max_sandboxes=max_sandboxes, creates_per_second=creates_per_second,
                                               create_burst=create_burst, requests_per_second=requests_per_second,
                                               request_burst=request_burst, trajectory_bytes=trajectory_bytes))

    def audit(self, **filters: Any) -> dict[str, Any]:
        """As ``AsyncClient.audit`` (``tenant``, ``sandbox``, ``action``, ``since``, ``until``, ``limit``)."""
        return self._lt.run(self._c.audit(**filters))
