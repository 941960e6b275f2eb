"""``sandbox.files``: files in and out of a sandbox in chunks, plus directory operations.

A file moves in chunks with a bounded window in flight each way (the window is the flow
control); a write goes to a temporary name and takes its real name only once the node has
checked its size and sha256. Chunks are placed by offset, so one sent again after a reconnect
lands on the same bytes.
"""
from __future__ import annotations

import asyncio
import hashlib
import posixpath
import secrets
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterable

from .errors import NotFoundError, invalid
from .link import Link
from .names import from_wire, to_wire


@dataclass(frozen=True)
class FilesClientDefaults:
    chunk_bytes: int = 768 * 1024
    in_flight: int = 8
    request_timeout_s: float = 60.0


FILES_DEFAULTS = FilesClientDefaults()


@dataclass(frozen=True)
class FileInfo:
    """A directory entry, with its full path in the sandbox."""

    name: str
    path: str
    type: str
    size: int
    mode: int
    mtime_ms: int


@dataclass(frozen=True)
class FileStat:
    type: str
    size: int
    mode: int
    uid: int
    gid: int
    mtime_ms: int
    target: str | None = None


@dataclass(frozen=True)
class WriteInfo:
    path: str
    size: int
    sha256: str


WriteData = "bytes | bytearray | memoryview | str | Iterable[bytes] | AsyncIterator[bytes]"


async def _pieces(data: Any, size: int) -> AsyncIterator[bytes]:
    """``data`` cut into pieces of at most ``size`` bytes, whatever it is."""
    if isinstance(data, str):
        data = data.encode()
    if isinstance(data, (bytes, bytearray, memoryview)):
        view = memoryview(data)
        for at in range(0, len(view), size):
            yield bytes(view[at:at + size])
        return
    if hasattr(data, "__aiter__"):
        async for part in data:
            for at in range(0, len(part), size):
                yield bytes(part[at:at + size])
        return
    if hasattr(data, "read"):
        while True:
            part = data.read(size)
            if not part:
                return
            yield part
        return
    for part in data:
        for at in range(0, len(part), size):
            yield bytes(part[at:at + size])


class SandboxFiles:
    """The files API of one sandbox."""

    def __init__(self, link: Link, sandbox_id: str, defaults: FilesClientDefaults = FILES_DEFAULTS) -> None:
        self._link = link
        self._id = sandbox_id
        self.d = defaults

    async def call(self, req: dict[str, Any], idempotent: bool = True) -> Any:
        """One file request; idempotent ones are sent again after a lost socket or an overload."""
        for key in ("path", "to"):
            if key in req:
                req = {**req, key: to_wire(req[key])}
        return await self._link.request({"type": "files", "id": self._id, **req}, self.d.request_timeout_s, retry=idempotent)

    async def write(self, path: str, data: Any, *, mode: int | None = None) -> WriteInfo:
        """Creates or replaces a file atomically (bytes, str, a file object or an (async) iterable of bytes)."""
        return await self.send(path, data, "file", mode)

    async def send(self, path: str, data: Any, fmt: str, mode: int | None = None) -> WriteInfo:
        """An upload of either format (``file`` or ``tar``)."""
        upload = secrets.token_hex(8)
        begin: dict[str, Any] = {"op": "write-begin", "upload": upload, "path": path, "format": fmt}
        if mode is not None:
            begin["mode"] = mode
        if isinstance(data, (bytes, bytearray, memoryview, str)):
            begin["size"] = len(data.encode() if isinstance(data, str) else data)
        state = await self.call(begin)
        chunk = min(self.d.chunk_bytes, int(state.get("maxChunkBytes", self.d.chunk_bytes)))
        max_file = int(state.get("maxFileBytes", 1 << 30))
        digest = hashlib.sha256()
        inflight: set[asyncio.Task[Any]] = set()
        offset = 0
        try:
            async for piece in _pieces(data, chunk):
                if offset + len(piece) > max_file:
                    raise invalid("size", f"size exceeds the maximum file size of {max_file} bytes", max=max_file)
                digest.update(piece)
                inflight.add(asyncio.ensure_future(self.call({"op": "write-chunk", "upload": upload, "offset": offset, "data": piece})))
                offset += len(piece)
                while len(inflight) >= self.d.in_flight:
                    done, inflight = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
                    # Every finished chunk's outcome is taken (several may have failed at once:
                    # one left unread would be logged as never retrieved); the first failure is raised.
                    failures = [t.exception() for t in done if not t.cancelled()]
                    first = next((e for e in failures if e is not None), None)
                    if first is not None:
                        raise first
            if inflight:
                for t in await asyncio.gather(*inflight):
                    pass
                inflight = set()
            end = await self.call({"op": "write-end", "upload": upload, "size": offset, "sha256": digest.hexdigest()})
            return WriteInfo(path, int(end["size"]), str(end["sha256"]))
        except BaseException:
            for t in inflight:
                t.cancel()
            await asyncio.gather(*inflight, return_exceptions=True)
            try:
                await self.call({"op": "write-abort", "upload": upload}, False)
            except Exception:
                pass  # the node drops an idle upload on its own
            raise

    async def read(self, path: str) -> bytes:
        """The whole file as bytes."""
        return b"".join([c async for c in self.chunks(path)])

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """The whole file as text."""
        return (await self.read(path)).decode(encoding)

    async def chunks(self, path: str) -> AsyncIterator[bytes]:
        """The file's chunks in order, read ahead a window at a time; a file that changed while read is refused."""
        first = await self.stat(path, follow=True)
        if first.type != "file":
            raise invalid("path", f"{path} is {'a directory' if first.type == 'dir' else 'not a regular file'}")
        n = self.d.chunk_bytes

        async def read_at(offset: int) -> bytes:
            return bytes(await self.call({"op": "read", "path": path, "offset": offset, "length": n}))

        if first.size == 0:  # /proc files say 0: read until they end
            offset = 0
            while True:
                data = await read_at(offset)
                if not data:
                    return
                offset += len(data)
                yield data
        ahead: list[asyncio.Task[bytes]] = []
        nxt = 0
        try:
            offset = 0
            while offset < first.size:
                while len(ahead) < self.d.in_flight and nxt < first.size:
                    ahead.append(asyncio.ensure_future(read_at(nxt)))
                    nxt += n
                data = await ahead.pop(0)
                if len(data) != min(n, first.size - offset):
                    raise invalid("path", f"{path} changed while it was read", reason="changed")
                offset += len(data)
                yield data
        finally:
            for t in ahead:
                t.cancel()
            await asyncio.gather(*ahead, return_exceptions=True)
        last = await self.stat(path, follow=True)
        if last.size != first.size or last.mtime_ms != first.mtime_ms:
            raise invalid("path", f"{path} changed while it was read", reason="changed")

    async def list(self, path: str) -> list[FileInfo]:
        """The entries of a directory (at most 10,000)."""
        r = await self.call({"op": "list", "path": path})
        at = from_wire(path)
        return [FileInfo(from_wire(e["name"]), posixpath.join(at, from_wire(e["name"])), e["type"], int(e.get("size", 0)),
                         int(e.get("mode", 0)), int(e.get("mtimeMs", 0))) for e in r.get("entries", [])]

    async def stat(self, path: str, *, follow: bool = False) -> FileStat:
        """Describes a path (a symlink itself unless ``follow``); NotFoundError when nothing is there."""
        req: dict[str, Any] = {"op": "stat", "path": path}
        if follow:
            req["follow"] = True
        s = await self.call(req)
        return FileStat(s["type"], int(s.get("size", 0)), int(s.get("mode", 0)), int(s.get("uid", 0)), int(s.get("gid", 0)),
                        int(s.get("mtimeMs", 0)), from_wire(s["target"]) if s.get("target") is not None else None)

    async def exists(self, path: str) -> bool:
        """True when something is at ``path`` (a dangling symlink counts)."""
        try:
            await self.stat(path)
            return True
        except NotFoundError:
            return False

    async def mkdir(self, path: str, *, parents: bool = False, mode: int | None = None) -> None:
        """Makes a directory; ``parents``: the missing ones above too."""
        req: dict[str, Any] = {"op": "mkdir", "path": path}
        if parents:
            req["parents"] = True
        if mode is not None:
            req["mode"] = mode
        await self.call(req, parents)

    async def remove(self, path: str, *, recursive: bool = False) -> None:
        """Removes a file, symlink or empty directory; ``recursive``: a whole tree."""
        req: dict[str, Any] = {"op": "remove", "path": path}
        if recursive:
            req["recursive"] = True
        await self.call(req, False)

    async def rename(self, src: str, dst: str) -> None:
        """Renames atomically within one file system."""
        await self.call({"op": "rename", "path": src, "to": dst}, False)

    async def upload(self, local_path: str, sandbox_path: str) -> WriteInfo:
        """Copies a local file, or a directory tree as a tar (modes and symlinks kept), into the sandbox."""
        from .tree import upload_tree
        return await upload_tree(self, local_path, sandbox_path)

    async def download(self, sandbox_path: str, local_path: str) -> None:
        """Copies a sandbox file or tree to ``local_path``; nothing is written outside it."""
        from .tree import download_tree
        await download_tree(self, sandbox_path, local_path)
