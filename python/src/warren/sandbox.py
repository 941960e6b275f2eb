"""A sandbox as the client holds it: exec, spawn, files, sessions, lifecycle.

Its ``state`` is kept current by the control plane's notices (``sandbox-state`` tells), so
reading it costs no round trip; ``info()`` is the truth.
"""
from __future__ import annotations

import asyncio
import secrets
import string
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, Union

from .errors import invalid
from .exec import EXEC_DEFAULTS, Chunk, CommandResult, ExecPump
from .files import SandboxFiles
from .link import Link
from .process import Process
from .session import ShellSession, open_session
from .snapshots import ForkResult, fork_of, hibernate_of, pause_of, resume_of, snapshot_of
from .trajectory import TrajectoryPage, read_page
from .views import SandboxView, SnapshotView

if TYPE_CHECKING:
    from .client import AsyncClient

Command = Union[str, Sequence[str]]
KILL_TIMEOUT_S = 60.0 + 10.0
_ALPHABET = string.ascii_letters + string.digits + "_-"


def new_id(n: int = 16) -> str:
    """A random id of ``n`` URL-safe characters (like nanoid in the TS SDK)."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(n))


def to_argv(command: Command) -> list[str]:
    """A string is a shell command line (``/bin/sh -c``); a sequence is an argv as given."""
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    argv = list(command)
    if not argv or not all(isinstance(a, str) for a in argv):
        raise invalid("argv", "a command is a string or a non-empty list of strings")
    return argv


class SandboxRef:
    """A sandbox's id and cluster URL without a token: what a handle pickles to."""

    def __init__(self, id: str, url: str) -> None:
        self.id = id
        self.url = url

    def attach(self, client: Any) -> Any:
        """The live handle through ``client`` (the worker's own key): a coroutine of a ``Sandbox``
        for an ``AsyncClient``, a ``SyncSandbox`` for a ``Client``."""
        return client.attach(self.id)

    def __repr__(self) -> str:
        return f"SandboxRef(id={self.id!r}, url={self.url!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (SandboxRef, (self.id, self.url))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SandboxRef) and (self.id, self.url) == (other.id, other.url)

    def __hash__(self) -> int:
        return hash((self.id, self.url))


class Sandbox:
    """One sandbox. Made by ``AsyncClient.create``/``create_many``/``attach``."""

    def __init__(self, link: Link, view: SandboxView, handle_of: Callable[[SandboxView], "Sandbox"] | None = None) -> None:
        self._link = link
        self.view = view
        self.files = SandboxFiles(link, view.id)
        # The client's handle for another sandbox (a fork's): one handle per id, kept current by notices.
        self._handle_of = handle_of or (lambda v: Sandbox(link, v))

    @property
    def id(self) -> str:
        return self.view.id

    @property
    def url(self) -> str:
        """The cluster the sandbox lives in."""
        return self._link.url

    @property
    def state(self) -> str:
        """The latest known state (``ready``, ``gone``, ``lost``, ...), kept current by notices."""
        return self.view.state

    @property
    def labels(self) -> dict[str, str]:
        return self.view.labels

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, state={self.state!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # The id and the URL cross a process boundary; the token never does.
        return (SandboxRef, (self.id, self.url))

    async def info(self) -> SandboxView:
        """Fetches the sandbox's record from the control plane."""
        self.view = SandboxView.from_wire(await self._link.request({"type": "info", "id": self.id}, 10.0, retry=True))
        return self.view

    async def exec(self, command: Command, *, cwd: str | None = None, user: str | int | None = None,
                   env: Mapping[str, str] | None = None, stdin: bytes | str | None = None, timeout_ms: int | None = None,
                   max_output_bytes: int | None = None, on_stdout: Callable[[bytes], None] | None = None,
                   on_stderr: Callable[[bytes], None] | None = None) -> CommandResult:
        """Runs a command to its end and collects its output (stdout/stderr decoded as UTF-8)."""
        out: list[bytes] = []
        err: list[bytes] = []

        def take(c: Chunk) -> None:
            if c.stream == "stdout":
                out.append(c.data)
                if on_stdout is not None:
                    on_stdout(c.data)
            else:
                err.append(c.data)
                if on_stderr is not None:
                    on_stderr(c.data)

        pump, _ = self._start(command, take, cwd=cwd, user=user, env=env, stdin=stdin, timeout_ms=timeout_ms,
                              max_output_bytes=max_output_bytes)
        r = await pump.wait()
        ob, eb = b"".join(out), b"".join(err)
        return CommandResult(r.exit_code, r.duration_ms, r.truncated, r.reason, r.message,
                             ob.decode("utf-8", "replace"), eb.decode("utf-8", "replace"), ob, eb)

    def spawn(self, command: Command, *, cwd: str | None = None, user: str | int | None = None,
              env: Mapping[str, str] | None = None, stdin: bytes | str | None = None, open_stdin: bool = False,
              timeout_ms: int | None = None, max_output_bytes: int | None = None,
              pty: tuple[int, int] | Mapping[str, int] | None = None) -> Process:
        """Starts a command and returns its running handle (``pty``: ``(cols, rows)``)."""
        pump, started = self._start(command, None, cwd=cwd, user=user, env=env, stdin=stdin, open_stdin=open_stdin,
                                    timeout_ms=timeout_ms, max_output_bytes=max_output_bytes, pty=pty)
        return Process(self._link, self.id, pump, started, open_stdin)

    async def session(self, *, cwd: str | None = None, env: Mapping[str, str] | None = None,
                      user: str | int | None = None) -> ShellSession:
        """A persistent shell: cwd, variables and jobs carry from one ``run`` to the next."""
        return await open_session(self, cwd=cwd, env=env, user=user)

    async def trajectory(self, from_seq: int | None = None, limit: int | None = None) -> TrajectoryPage:
        """What happened in the sandbox, a page at a time: its header (from seq 0), then its steps (every
        command with argv, env, cwd, stdin, exit code and outputs; file changes; egress; snapshot, pause,
        resume), numbered; read on from ``next_seq`` (``client.steps(id)`` pages for you). Kept by the
        control plane, so it reads the same after the sandbox has ended."""
        return await read_page(self._link, self.id, from_seq, limit)

    async def kill(self) -> None:
        """Ends the sandbox; returns once it has ended and its capacity is free again."""
        self.view = SandboxView.from_wire(await self._link.request({"type": "kill", "id": self.id}, KILL_TIMEOUT_S, retry=True))

    async def set_ttl(self, ms: int) -> int:
        """It now ends ``ms`` from now; returns when (ms since the epoch, the control plane's clock)."""
        self.view = SandboxView.from_wire(await self._link.request({"type": "set-ttl", "id": self.id, "ttlMs": ms}, 15.0, retry=True))
        return self.view.expires_at

    async def pause(self) -> SandboxView:
        """Freezes the sandbox (container sandboxes): its processes stop where they are, its memory is kept.

        While paused, commands and file operations raise ``SandboxPausedError``; ``info``, ``set_ttl``
        and ``kill`` work. Pausing a paused sandbox is not an error. Its TTL keeps counting unless the
        spec said ``paused_ttl=False``. Raises ``UnsupportedError`` for a backend that cannot pause."""
        self.view = await pause_of(self._link, self.id)
        return self.view

    async def resume(self) -> SandboxView:
        """Thaws a paused sandbox (its processes go on where they stopped), or creates a hibernated one
        again from its snapshot with the same id (its files as they were, its processes not).
        Resuming a running sandbox is not an error. Returns its view, state ``ready``."""
        self.view = await resume_of(self._link, self.id)
        return self.view

    async def snapshot(self, name: str | None = None, *, memory: bool = False) -> SnapshotView:
        """Cuts a snapshot of the sandbox's file system (its processes are frozen while it is cut).

        Create from it with ``client.create(snapshot=view.id)`` (or by ``name``, ``name:tag``, which
        moves from the tenant's snapshot that had it). Not sent again after a lost socket: find one
        that may have been cut with ``client.snapshots(sandbox_id=sb.id)``. With ``memory`` (microvm
        sandboxes), the whole VM: sandboxes made from it go on running its processes."""
        return await snapshot_of(self._link, self.id, name, memory=memory)

    async def fork(self, n: int, spec: Mapping[str, Any] | None = None, *, deadline_ms: int | None = None,
                   memory: bool = False, **fields: Any) -> ForkResult["Sandbox"]:
        """One snapshot of the sandbox, then ``n`` (1-1000) sandboxes from it in one request.

        ``spec`` (and keyword fields, as ``create`` takes them: ``labels``, ``env``, ``limits``,
        ``ttl_ms``...) is laid over this sandbox's spec: labels, env and limits key by key, the rest
        replaced. Each fork has its own outcome: when some find no room, the others are still made.
        With ``memory`` (microvm), each fork goes on running this sandbox's processes."""
        merged = {**(spec or {}), **fields}
        return await fork_of(self._link, self.id, n, merged, deadline_ms, self._handle_of, memory=memory)

    async def hibernate(self) -> SandboxView:
        """Snapshots the sandbox and ends it on its node, keeping its record (state ``hibernated``, no node,
        CPU, memory or quota held). ``resume()`` or ``client.attach(id)`` brings it back, same id.
        Its TTL keeps counting; a kill ends it for good."""
        self.view = await hibernate_of(self._link, self.id)
        return self.view

    def _notice(self, state: str, reason: str | None, message: str | None) -> None:
        self.view = self.view.with_state(state, reason, message)

    def _start(self, command: Command, on_chunk: Callable[[Chunk], None] | None, *, cwd: str | None, user: str | int | None,
               env: Mapping[str, str] | None, stdin: bytes | str | None, timeout_ms: int | None,
               max_output_bytes: int | None, open_stdin: bool = False,
               pty: tuple[int, int] | Mapping[str, int] | None = None) -> tuple[ExecPump, "asyncio.Future[Any]"]:
        argv = to_argv(command)
        opts: dict[str, Any] = {}
        if stdin is not None:
            opts["stdin"] = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
        if env is not None:
            opts["env"] = dict(env)
        if cwd is not None:
            opts["cwd"] = cwd
        if user is not None:
            opts["user"] = str(user)
        if pty is not None:
            cols, rows = (pty["cols"], pty["rows"]) if isinstance(pty, Mapping) else pty
            opts["pty"] = {"cols": cols, "rows": rows}
        if timeout_ms is not None:
            opts["timeoutMs"] = timeout_ms
        if max_output_bytes is not None:
            opts["maxOutputBytes"] = max_output_bytes
        if open_stdin:
            opts["openStdin"] = True
        exec_id = new_id()
        pump = ExecPump(self._link, self.id, exec_id, on_chunk)
        message = {"type": "exec", "id": self.id, "execId": exec_id, "argv": argv, "opts": opts}
        # Starting is idempotent by execId: a start lost with its socket is simply sent again.
        started = asyncio.ensure_future(self._link.request(message, EXEC_DEFAULTS.read_wait_ms / 1000 + EXEC_DEFAULTS.margin_s,
                                                           retry=True))

        def begun(f: "asyncio.Future[Any]") -> None:
            if f.cancelled():
                pump.abort(asyncio.CancelledError())
            elif f.exception() is not None:
                pump.abort(f.exception())  # type: ignore[arg-type]
            else:
                pump.start(f.result())

        started.add_done_callback(begun)
        return pump, started
