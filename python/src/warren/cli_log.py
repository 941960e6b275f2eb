"""How ``python -m warren log`` prints a trajectory, as the Node CLI's ``warren log`` does.

Readable: the header, then a step a line with the first lines of what it recorded below it.
``--json``: the wire form as JSON lines — the header, then one step per line, every byte field
(``data``, ``head``, ``tail``) a base64 string (docs/protocol.md, "Trajectories as JSON").
"""
from __future__ import annotations

import base64
import json
from datetime import datetime, timezone
from typing import Any

from .trajectory import ExecStep, RecordedBytes, Step, TrajectoryHeader

#: Lines, and bytes, of a recorded stream printed under its step (the rest is counted).
MAX_LINES = 20
MAX_BYTES = 4096


def json_line(value: Any) -> str:
    """A wire value as one JSON line: bytes become base64 strings."""
    def bytes_to_text(v: Any) -> Any:
        if isinstance(v, (bytes, bytearray, memoryview)):
            return base64.b64encode(bytes(v)).decode("ascii")
        raise TypeError(f"not JSON: {type(v).__name__}")
    return json.dumps(value, default=bytes_to_text, separators=(",", ":"))


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def header_line(h: TrajectoryHeader) -> str:
    """The sandbox, its backend and layers, its tenant, node and birth."""
    layers = f" on {' < '.join(h.layers)}" if h.layers else ""
    made = f" from snapshot {h.snapshot}" if h.snapshot else ""
    return f"sandbox {h.sandbox_id} ({h.spec.get('backend', '?')}{layers}) of {h.tenant} on {h.node}, created {_when(h.created_at)}{made}\n"


def _size(r: RecordedBytes | None) -> str:
    if r is None:
        return "0 B"
    kept = "" if r.data is not None else " in the blob store" if r.blob is not None else " (head and tail kept)"
    return f"{r.bytes} B{kept}"


def _head(name: str, r: RecordedBytes | None) -> str:
    shown = (r.data if r is not None and r.data is not None else r.head if r is not None else None)
    if r is None or not shown:
        return ""
    lines = shown[:MAX_BYTES].decode("utf-8", "replace").rstrip("\n").split("\n")
    out = "".join(f"  {name}| {line}\n" for line in lines[:MAX_LINES])
    printed = len("\n".join(lines[:MAX_LINES]).encode())
    if printed < r.bytes - 1:
        out += f"  {name}| … ({r.bytes - printed} more bytes)\n"
    return out


def _exec_line(s: ExecStep) -> str:
    how = " ".join(x for x in [f"cwd={s.cwd}" if s.cwd else "", f"user={s.user}" if s.user else "",
                               f"pty={s.pty[0]}x{s.pty[1]}" if s.pty else "",
                               f"env={','.join(s.env)}" if s.env else ""] if x)
    if s.ended_at is None:
        ended = "running"
    else:
        took = s.duration_ms if s.duration_ms is not None else s.ended_at - s.at
        why = f" ({s.reason})" if s.reason else ""
        ended = f"exit {s.exit_code if s.exit_code is not None else '?'}{why} in {round(took)} ms, {_size(s.stdout)} out, {_size(s.stderr)} err"
    stdin = f", {_size(s.stdin)} in" if s.stdin is not None else ""
    return f"exec {json.dumps(s.argv)}{' ' + how if how else ''} {ended}{stdin}"


def step_lines(s: Step) -> str:
    """One step as its line, then the heads of what it recorded."""
    streams: list[tuple[str, RecordedBytes | None]] = []
    if isinstance(s, ExecStep):
        line = _exec_line(s)
        streams = [("in", s.stdin), ("out", s.stdout), ("err", s.stderr)]
    else:
        fields = {k: v for k, v in vars(s).items() if k not in ("seq", "at")}
        content = fields.pop("content", None)
        line = s.kind + "".join(f" {k}={v}" for k, v in fields.items() if v not in (None, False))
        if isinstance(content, RecordedBytes):
            line += f": {_size(content)}, sha256 {content.sha256[:16]}…"
    return f"#{s.seq} {_when(s.at)} {line}\n" + "".join(_head(name, r) for name, r in streams)
