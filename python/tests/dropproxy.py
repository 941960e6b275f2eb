"""A TCP proxy in front of the cluster that kills its sockets mid-stream on demand, for the
resume tests: what a client sees when a NAT or a load balancer drops a connection."""
from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from urllib.parse import urlparse

BUFFER = 64 * 1024


@dataclass
class _Conn:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    down_since_arm: int = 0
    up_since_arm: int = 0
    dead: bool = False


class DropProxy:
    """Forwards 127.0.0.1:<port> to the cluster, on its own thread and event loop.

    `arm(cut_bytes, drops)`: each connection is aborted (both sides, mid-frame) once it has
    carried `cut_bytes` from the server after the arming, until `drops` connections have been
    cut; with `after_request`, only once the client has sent something since the arming.
    """

    def __init__(self, target_url: str) -> None:
        u = urlparse(target_url)
        self._host, self._port = u.hostname or "127.0.0.1", u.port or 80
        self._lock = threading.Lock()
        self._conns: list[_Conn] = []
        self._cut: int | None = None
        self._drops_left = 0
        self._after_request = False
        self.drops = 0
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="drop-proxy", daemon=True)
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", 0), self._loop).result(10)
        self.url = f"ws://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def arm(self, cut_bytes: int, drops: int = 1, after_request: bool = False) -> None:
        with self._lock:
            self._cut, self._drops_left, self._after_request = cut_bytes, drops, after_request
            for c in self._conns:
                c.down_since_arm = c.up_since_arm = 0

    def close(self) -> None:
        async def stop() -> None:
            self._server.close()
            for c in list(self._conns):
                self._abort(c)
        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _abort(self, c: _Conn) -> None:
        c.dead = True
        c.client.transport.abort()
        c.upstream.transport.abort()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self._host, self._port)
        except OSError:
            writer.transport.abort()
            return
        conn = _Conn(writer, up_writer)
        with self._lock:
            self._conns.append(conn)
            self.connections += 1
        try:
            await asyncio.gather(self._pump(reader, up_writer, conn, down=False), self._pump(up_reader, writer, conn, down=True))
        finally:
            with self._lock:
                self._conns.remove(conn)
            if not conn.dead:
                self._abort(conn)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, conn: _Conn, down: bool) -> None:
        while not conn.dead:
            try:
                data = await src.read(BUFFER)
            except OSError:
                data = b""
            if not data:
                self._abort(conn)
                return
            with self._lock:
                if not down:
                    conn.up_since_arm += len(data)
                    cut_at = None
                else:
                    armed = self._cut is not None and self._drops_left > 0 and (not self._after_request or conn.up_since_arm > 0)
                    room = self._cut - conn.down_since_arm if armed and self._cut is not None else None
                    cut_at = room if room is not None and len(data) >= room else None
                    if cut_at is not None:
                        self._drops_left -= 1
                        self.drops += 1
                    else:
                        conn.down_since_arm += len(data)
            if cut_at is not None:
                dst.write(data[:cut_at])
                self._abort(conn)
                return
            dst.write(data)
            try:
                await dst.drain()
            except OSError:
                self._abort(conn)
                return
