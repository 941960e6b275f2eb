"""A persistent shell in a sandbox (``await sb.session()``), as the TS SDK's ``ShellSession``.

One spawned shell (bash when the sandbox has it, else sh) whose stdin stays open. A run writes
the command quoted as one word for ``eval`` with stdin on /dev/null, then a line of two markers
that print its exit status on stdout and an end line on stderr; each marker carries a nonce
fresh for that run, so output cannot fake the end of a run it does not know. A run that outlives
its ``timeout_ms`` gets SIGINT to the shell's process group (the shell traps it and lives).
"""
from __future__ import annotations

import asyncio
import re
import secrets
import time
from typing import TYPE_CHECKING, Mapping

from .errors import InternalError, WarrenError, invalid
from .exec import CommandResult

if TYPE_CHECKING:
    from .process import Process
    from .sandbox import Sandbox

MAX_OUTPUT_BYTES = 16 * 1024 * 1024
INTERRUPT_GRACE_S = 2.0
OPEN_TIMEOUT_MS = 30_000
MAX_COMMAND_BYTES = 1024 * 1024
LAUNCH = "if command -v bash >/dev/null 2>&1; then exec bash --noprofile --norc; fi; exec /bin/sh"
PRELUDE = "__warren_run () { command eval \"$1\" </dev/null; }; trap 'return 130 2>/dev/null || :' INT; echo $$"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


class _Cut:
    """One stream of a run: what is kept, and the tail that may still be the start of the marker."""

    def __init__(self, marker: bytes, run: "_Run") -> None:
        self.marker = marker
        self.run = run
        self.kept: list[bytes] = []
        self.pending = b""

    def push(self, data: bytes) -> bytes | None:
        self.pending += data
        at = self.pending.find(self.marker)
        if at >= 0:
            self._keep(self.pending[:at])
            rest = self.pending[at + len(self.marker):]
            self.pending = b""
            return rest
        safe = max(0, len(self.pending) - len(self.marker))
        self._keep(self.pending[:safe])
        self.pending = self.pending[safe:]
        return None

    def flush(self) -> None:
        self._keep(self.pending)
        self.pending = b""

    def _keep(self, b: bytes) -> None:
        n = min(len(b), self.run.room)
        self.run.room -= n
        if n < len(b):
            self.run.truncated = True
        if n:
            self.kept.append(b[:n])

    def text(self) -> str:
        return b"".join(self.kept).decode("utf-8", "replace")


class _Run:
    def __init__(self, nonce: str, room: int) -> None:
        self.room = room
        self.truncated = False
        self.out = _Cut(f"\n__WARREN_{nonce}_".encode(), self)
        self.err = _Cut(f"\n__WARREN_{nonce}_END__\n".encode(), self)
        self.exit_code: int | None = None
        self.err_done = False
        self.status = b""
        self.done: asyncio.Future[tuple[int, str | None, str | None]] = asyncio.get_running_loop().create_future()

    def finish(self, code: int, reason: str | None = None, message: str | None = None) -> None:
        if not self.done.done():
            self.done.set_result((code, reason, message))


class ShellSession:
    """A shell whose cwd, variables and jobs carry from one ``run`` to the next."""

    def __init__(self, sandbox: "Sandbox", shell: "Process") -> None:
        self._sb = sandbox
        self._shell = shell
        self._active: _Run | None = None
        self._lock = asyncio.Lock()
        self._ended: WarrenError | None = None
        self._pid = 0
        self._reader = asyncio.create_task(self._read())

    @property
    def closed(self) -> bool:
        """True once the shell has ended (closed, killed, or it ran ``exit``)."""
        return self._ended is not None

    async def run(self, command: str, *, timeout_ms: int | None = None, max_output_bytes: int = MAX_OUTPUT_BYTES) -> CommandResult:
        """Runs a command line in the shell; ``reason='timeout'`` (exit 124) when it was interrupted."""
        if not isinstance(command, str) or "\0" in command or len(command.encode()) > MAX_COMMAND_BYTES:
            raise invalid("command", f"command must be a string of at most {MAX_COMMAND_BYTES} bytes without NUL")
        if isinstance(max_output_bytes, bool) or not isinstance(max_output_bytes, int) or max_output_bytes < 0:
            raise invalid("max_output_bytes", "max_output_bytes must be an integer >= 0")
        if timeout_ms is not None and (isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms <= 0):
            raise invalid("timeout_ms", "timeout_ms must be an integer > 0")
        async with self._lock:
            return await self._run_now(f"__warren_run {_quote(command)}", max_output_bytes, timeout_ms)

    async def close(self) -> None:
        """Ends the shell and every job it started; closing a closed session is not an error."""
        if self._ended is None:
            self._ended = invalid("session", "the session was closed")
        try:
            await self._shell.kill()
            await self._shell.wait()
        except WarrenError:
            pass

    async def __aenter__(self) -> "ShellSession":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _init(self) -> None:
        try:
            async with self._lock:
                r = await self._run_now(PRELUDE, MAX_OUTPUT_BYTES, OPEN_TIMEOUT_MS)
        except BaseException:
            await self.close()
            raise
        try:
            self._pid = int(r.stdout.strip())
        except ValueError:
            self._pid = 0
        if r.exit_code != 0 or self._pid <= 0:
            why = self._ended
            await self.close()
            raise why or InternalError(f"the session's shell did not start: {r.stderr.strip() or f'exit {r.exit_code}'}")

    async def _run_now(self, line: str, room: int, timeout_ms: int | None) -> CommandResult:
        if self._ended is not None:
            raise self._ended
        nonce = secrets.token_hex(12)
        run = _Run(nonce, room)
        self._active = run
        started = time.monotonic()
        out_mark, err_mark = f"__WARREN_{nonce}_", f"__WARREN_{nonce}_END__"
        text = (f"{line}\n__warren_rc=$?; printf '\\n%s%d__\\n' {out_mark} \"$__warren_rc\"; "
                f"printf '\\n%s\\n' {err_mark} >&2\n")
        writing = asyncio.ensure_future(self._shell.write(text))
        writing.add_done_callback(lambda f: None if f.cancelled() or f.exception() is None else self._end(f.exception()))
        interrupted = False
        try:
            if timeout_ms is None:
                code, reason, message = await run.done
            else:
                try:
                    code, reason, message = await asyncio.wait_for(asyncio.shield(run.done), timeout_ms / 1000)
                except asyncio.TimeoutError:
                    interrupted = True
                    # SIGINT to the shell's group: the command ends, the shell (it traps INT) and jobs live.
                    await self._sb.exec(["/bin/sh", "-c", 'kill -INT "-$1"', "sh", str(self._pid)])
                    try:
                        code, reason, message = await asyncio.wait_for(asyncio.shield(run.done), INTERRUPT_GRACE_S)
                    except asyncio.TimeoutError:
                        code, reason, message = 137, "timeout", f"the command did not end on SIGINT after {timeout_ms} ms: the session was killed"
                        self._active = None
                        await self.close()
                if interrupted and reason is None:
                    code, reason, message = 124, "timeout", f"interrupted after {timeout_ms} ms"
        finally:
            if self._active is run:
                self._active = None
        return CommandResult(code, int((time.monotonic() - started) * 1000), run.truncated, reason, message,
                             run.out.text(), run.err.text())

    async def _read(self) -> None:
        try:
            async for chunk in self._shell:
                self._accept(chunk.stream, chunk.data)
            r = await self._shell.wait()
            self._end(invalid("session", f"the session's shell ended (exit {r.exit_code})", exitCode=r.exit_code), r.exit_code)
        except BaseException as err:  # noqa: B036 - the shell's failure ends the run under way
            self._end(err)

    def _accept(self, stream: str, data: bytes) -> None:
        run = self._active
        if run is None:
            return  # a background job's output between runs
        if stream == "stderr":
            if not run.err_done and run.err.push(data) is not None:
                run.err_done = True
        elif run.exit_code is None:
            rest = data if run.status else run.out.push(data)
            if rest is not None:
                run.status += rest
                m = re.match(rb"^(\d+)__\n", run.status)
                if m is not None:
                    run.exit_code = int(m.group(1))
                elif len(run.status) > 16:
                    run.exit_code = 126  # only our printf writes there: anything else is no status
        if run.exit_code is not None and run.err_done:
            run.finish(run.exit_code)

    def _end(self, err: BaseException | None, exit_code: int = 137) -> None:
        if self._ended is None:
            self._ended = err if isinstance(err, WarrenError) else InternalError(str(err))
        run = self._active
        if run is not None:
            run.out.flush()
            run.err.flush()
            run.finish(exit_code, None, self._ended.message)


async def open_session(sb: "Sandbox", *, cwd: str | None, env: Mapping[str, str] | None, user: str | int | None) -> ShellSession:
    """Starts a session's shell and waits for its first answer."""
    shell = sb.spawn(["/bin/sh", "-c", LAUNCH], open_stdin=True, cwd=cwd, env=env, user=user)
    s = ShellSession(sb, shell)
    await s._init()
    return s
