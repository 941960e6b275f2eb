"""Trajectories (docs/protocol.md, "Trajectories"): what happened in a sandbox, as typed views.

A page holds the header (when read from seq 0) and steps numbered from 0 without gaps; each
step's kind is its own class (``ExecStep``, ``WriteStep``...), a kind this SDK does not know
is an ``OtherStep`` holding the wire fields, so a newer cluster never breaks a reader. Bytes a
step recorded are a ``RecordedBytes``: inline, in the blob store (read in ranges), or only head
and tail once the sandbox's record budget was spent.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator, ClassVar, Mapping, Union

from .errors import invalid
from .link import Link
from .names import from_wire


@dataclass(frozen=True)
class TrajectoryReadDefaults:
    """The client's side of trajectory reads."""

    #: One page or one blob range (the cluster first flushes a live sandbox's node, ~2 s).
    timeout_s: float = 15.0
    #: Bytes one ``trajectory-blob`` read asks for (the cluster's maximum, 960 KiB).
    blob_read_bytes: int = 960 * 1024
    #: Bytes ``trajectory_blob`` reads in all when the size is not given (a bound on the client's memory).
    max_blob_bytes: int = 256 * 1024 * 1024


TRAJECTORY_DEFAULTS = TrajectoryReadDefaults()


def _opt_bytes(v: Any) -> bytes | None:
    return bytes(v) if isinstance(v, (bytes, bytearray, memoryview)) else None


@dataclass(frozen=True)
class RecordedBytes:
    """Bytes a step recorded: ``data`` inline, or ``blob`` (a digest in the blob store), or, once the
    sandbox's record budget was spent, only ``head`` and ``tail``; ``bytes`` and ``sha256`` always
    count and hash all of them."""

    bytes: int
    sha256: str
    data: bytes | None = None
    blob: str | None = None
    head: bytes | None = None
    tail: bytes | None = None

    @property
    def whole(self) -> bool:
        """True when all the bytes were kept (inline or in the blob store)."""
        return self.data is not None or self.blob is not None

    @staticmethod
    def from_wire(v: Any) -> "RecordedBytes | None":
        if not isinstance(v, Mapping):
            return None
        return RecordedBytes(int(v.get("bytes") or 0), str(v.get("sha256", "")), _opt_bytes(v.get("data")), v.get("blob"),
                             _opt_bytes(v.get("head")), _opt_bytes(v.get("tail")))


def _opt_int(v: Any) -> int | None:
    """A number that may be absent; msgpack carries times past 2**32 ms as floats."""
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _recorded(v: Any) -> RecordedBytes:
    return RecordedBytes.from_wire(v) or RecordedBytes(0, "")


@dataclass(frozen=True)
class TrajectoryHeader:
    """Where a trajectory starts: the sandbox, its spec as resolved (wire form: camelCase, digests,
    deterministic values), its layer stack bottom first, and the snapshot it was made from."""

    sandbox_id: str
    tenant: str
    node: str
    created_at: int
    spec: dict[str, Any]
    layers: list[str]
    snapshot: str | None = None

    @staticmethod
    def from_wire(v: Mapping[str, Any]) -> "TrajectoryHeader":
        return TrajectoryHeader(str(v.get("sandboxId")), str(v.get("tenant", "")), str(v.get("node", "")),
                                int(v.get("createdAt") or 0), dict(v.get("spec") or {}),
                                [str(x) for x in v.get("layers") or []], v.get("snapshot"))


@dataclass(frozen=True)
class ExecStep:
    """A command: argv and how it ran; once it ended, ``ended_at``, ``exit_code``, outputs."""

    kind: ClassVar[str] = "exec"
    seq: int
    at: int
    exec_id: str
    argv: list[str]
    env: dict[str, str] | None = None
    cwd: str | None = None
    user: str | None = None
    #: ``(cols, rows)`` for a command started with a terminal.
    pty: tuple[int, int] | None = None
    stdin: RecordedBytes | None = None
    ended_at: int | None = None
    exit_code: int | None = None
    reason: str | None = None
    duration_ms: int | None = None
    stdout: RecordedBytes | None = None
    stderr: RecordedBytes | None = None
    #: Set when the node agent restarted while the command ran and took it up again: ``stdout``
    #: and ``stderr`` then hold what it wrote from the first chunk the client had not acknowledged.
    resumed_at: int | None = None

    @property
    def ended(self) -> bool:
        return self.ended_at is not None


@dataclass(frozen=True)
class WriteStep:
    """A whole-file write (or a committed upload of one file)."""

    kind: ClassVar[str] = "write"
    seq: int
    at: int
    path: str
    content: RecordedBytes
    mode: int | None = None


@dataclass(frozen=True)
class UploadStep:
    """A tar tree unpacked at ``path``; ``content`` is the tar's bytes."""

    kind: ClassVar[str] = "upload"
    seq: int
    at: int
    path: str
    content: RecordedBytes


@dataclass(frozen=True)
class RemoveStep:
    kind: ClassVar[str] = "remove"
    seq: int
    at: int
    path: str
    recursive: bool = False


@dataclass(frozen=True)
class RenameStep:
    """A rename from ``src`` to ``dst`` (the wire's ``from`` and ``to``, as ``files.rename`` names them)."""

    kind: ClassVar[str] = "rename"
    seq: int
    at: int
    src: str
    dst: str


@dataclass(frozen=True)
class MkdirStep:
    kind: ClassVar[str] = "mkdir"
    seq: int
    at: int
    path: str
    mode: int | None = None
    parents: bool = False


@dataclass(frozen=True)
class SymlinkStep:
    kind: ClassVar[str] = "symlink"
    seq: int
    at: int
    path: str
    target: str


@dataclass(frozen=True)
class SnapshotStep:
    kind: ClassVar[str] = "snapshot"
    seq: int
    at: int
    snapshot: str
    layer: str


@dataclass(frozen=True)
class PauseStep:
    kind: ClassVar[str] = "pause"
    seq: int
    at: int


@dataclass(frozen=True)
class ResumeStep:
    kind: ClassVar[str] = "resume"
    seq: int
    at: int


@dataclass(frozen=True)
class EgressStep:
    """A connection the sandbox's egress proxy was asked for, and whether it was let through."""

    kind: ClassVar[str] = "egress"
    seq: int
    at: int
    host: str
    port: int
    allowed: bool


@dataclass(frozen=True)
class OtherStep:
    """A step of a kind this SDK does not know: its wire fields as they came."""

    seq: int
    at: int
    kind: str  # type: ignore[misc]
    fields: dict[str, Any] = field(default_factory=dict)


Step = Union[ExecStep, WriteStep, UploadStep, RemoveStep, RenameStep, MkdirStep, SymlinkStep, SnapshotStep, PauseStep,
             ResumeStep, EgressStep, OtherStep]


def _name(v: Any) -> str:
    """A path of a step: a str, or (bytes on the wire) a name that is not UTF-8, as os.fsdecode gives it."""
    return from_wire(v) if isinstance(v, (str, bytes, bytearray)) else str(v)


def _pty(v: Any) -> tuple[int, int] | None:
    return (int(v["cols"]), int(v["rows"])) if isinstance(v, Mapping) else None


def step_from_wire(v: Mapping[str, Any]) -> Step:
    """The typed view of one wire step."""
    seq, at, kind = int(v.get("seq") or 0), int(v.get("at") or 0), str(v.get("kind"))
    if kind == "exec":
        ended = v.get("endedAt")
        return ExecStep(seq, at, str(v.get("execId", "")), [str(a) for a in v.get("argv") or []],
                        dict(v["env"]) if isinstance(v.get("env"), Mapping) else None, v.get("cwd"), v.get("user"),
                        _pty(v.get("pty")), RecordedBytes.from_wire(v.get("stdin")), int(ended) if ended is not None else None,
                        v.get("exitCode"), v.get("reason"), v.get("durationMs"), RecordedBytes.from_wire(v.get("stdout")),
                        RecordedBytes.from_wire(v.get("stderr")), _opt_int(v.get("resumedAt")))
    if kind == "write":
        return WriteStep(seq, at, _name(v.get("path")), _recorded(v.get("content")), v.get("mode"))
    if kind == "upload":
        return UploadStep(seq, at, _name(v.get("path")), _recorded(v.get("content")))
    if kind == "remove":
        return RemoveStep(seq, at, _name(v.get("path")), bool(v.get("recursive", False)))
    if kind == "rename":
        return RenameStep(seq, at, _name(v.get("from")), _name(v.get("to")))
    if kind == "mkdir":
        return MkdirStep(seq, at, _name(v.get("path")), v.get("mode"), bool(v.get("parents", False)))
    if kind == "symlink":
        return SymlinkStep(seq, at, _name(v.get("path")), _name(v.get("target")))
    if kind == "snapshot":
        return SnapshotStep(seq, at, str(v.get("snapshot")), str(v.get("layer")))
    if kind == "pause":
        return PauseStep(seq, at)
    if kind == "resume":
        return ResumeStep(seq, at)
    if kind == "egress":
        return EgressStep(seq, at, str(v.get("host")), int(v.get("port") or 0), bool(v.get("allowed")))
    return OtherStep(seq, at, kind, {k: x for k, x in v.items() if k not in ("seq", "at", "kind")})


@dataclass(frozen=True)
class TrajectoryPage:
    """One read of a trajectory: ``header`` (from seq 0), steps in order, the seq to read on from, and
    ``complete`` once the sandbox has ended and every step it recorded is stored."""

    steps: list[Step]
    next_seq: int
    complete: bool
    header: TrajectoryHeader | None = None

    @staticmethod
    def from_wire(v: Mapping[str, Any]) -> "TrajectoryPage":
        h = v.get("header")
        return TrajectoryPage([step_from_wire(s) for s in v.get("steps") or []], int(v.get("nextSeq") or 0),
                              bool(v.get("complete", False)), TrajectoryHeader.from_wire(h) if isinstance(h, Mapping) else None)


async def read_page(link: Link, sid: str, from_seq: int | None, limit: int | None,
                    d: TrajectoryReadDefaults = TRAJECTORY_DEFAULTS) -> TrajectoryPage:
    """One page of sandbox ``sid``'s trajectory (a read: sent again after a lost socket)."""
    msg: dict[str, Any] = {"type": "trajectory", "id": sid}
    if from_seq is not None:
        msg["fromSeq"] = from_seq
    if limit is not None:
        msg["limit"] = limit
    return TrajectoryPage.from_wire(await link.request(msg, d.timeout_s, retry=True))


async def all_steps(link: Link, sid: str) -> AsyncIterator[Step]:
    """Every step recorded so far, in order, a page at a time (one page held at once)."""
    from_seq = 0
    while True:
        page = await read_page(link, sid, from_seq, None)
        for s in page.steps:
            yield s
        if not page.steps:
            return
        from_seq = page.next_seq


async def read_blob(link: Link, sid: str, digest: str, size: int | None,
                    d: TrajectoryReadDefaults = TRAJECTORY_DEFAULTS) -> bytes:
    """All the bytes of record blob ``digest`` of ``sid``'s trajectory, read in ranges: ``size`` of them
    when given (a ``RecordedBytes.bytes``), else up to the end (a short range), at most ``max_blob_bytes``."""
    want = d.max_blob_bytes if size is None else size
    if isinstance(want, bool) or not isinstance(want, int) or want < 0:
        raise invalid("size", "size must be an integer >= 0")
    parts: list[bytes] = []
    got = 0
    while got < want:
        length = min(d.blob_read_bytes, want - got)
        part = bytes(await link.request({"type": "trajectory-blob", "id": sid, "digest": digest, "offset": got,
                                         "length": length}, d.timeout_s, retry=True))
        parts.append(part)
        got += len(part)
        if len(part) < length:
            break  # the end of the blob
    if size is None and got >= want:
        raise invalid("size", f"the blob is larger than {want} bytes: give its size (RecordedBytes.bytes)", max=want)
    return b"".join(parts)


async def recorded_bytes(link: Link, sid: str, r: RecordedBytes) -> bytes | None:
    """All the bytes ``r`` stands for: inline, or read from the blob store; None when they were not kept whole."""
    if r.data is not None:
        return r.data
    if r.blob is None:
        return None
    return await read_blob(link, sid, r.blob, r.bytes)
