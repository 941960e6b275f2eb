"""Replay and restore (docs/protocol.md, "Replay"): a trajectory applied again in a fresh sandbox.

``client.replay(id)`` starts a new sandbox from the trajectory's header (its layers and spec),
applies its steps in order and compares each command's outcome with the one recorded, stopping
at the first that differs. ``client.restore(id)`` brings a sandbox whose node was lost (or that
ended) back under its own id, from its latest snapshot and the steps after it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Mapping, TypeVar

from .errors import invalid
from .link import Link
from .views import SandboxView, camel_spec

H = TypeVar("H")
COMPARE_MODES = ("exit", "output")


@dataclass(frozen=True)
class ReplayDefaults:
    """How long the client waits: a replay runs every command of the trajectory again."""

    #: The cluster's bound on a whole replay (30 min), its sandbox's placement (30 s) and create (60 s), a margin.
    replay_timeout_s: float = 30 * 60 + 30 + 60 + 30


REPLAY_DEFAULTS = ReplayDefaults()


@dataclass(frozen=True)
class OutputOutcome:
    """One stream of a command as compared: its count, its sha256 (hex) and its first bytes."""

    bytes: int
    sha256: str
    head: bytes = b""

    @staticmethod
    def from_wire(v: Any) -> "OutputOutcome | None":
        if not isinstance(v, Mapping):
            return None
        head = v.get("head")
        return OutputOutcome(int(v.get("bytes") or 0), str(v.get("sha256", "")),
                             bytes(head) if isinstance(head, (bytes, bytearray, memoryview)) else b"")


@dataclass(frozen=True)
class StepOutcome:
    """How a command ended: as recorded (``expected``) or as replayed (``actual``)."""

    exit_code: int | None = None
    #: The recorded end's reason (``timeout``, ``killed``, ``oom``...), or ``timeout`` for a replayed step that overran.
    reason: str | None = None
    stdout: OutputOutcome | None = None
    stderr: OutputOutcome | None = None

    @staticmethod
    def from_wire(v: Any) -> "StepOutcome | None":
        if not isinstance(v, Mapping):
            return None
        return StepOutcome(v.get("exitCode"), v.get("reason"), OutputOutcome.from_wire(v.get("stdout")),
                           OutputOutcome.from_wire(v.get("stderr")))


def _divergence(r: Mapping[str, Any]) -> dict[str, Any]:
    """The fields a replay's and a restore's answers share: where their steps went another way, if they did."""
    at = r.get("divergedAt")
    return {"diverged_at": int(at) if isinstance(at, int) and not isinstance(at, bool) else None, "reason": r.get("reason"),
            "message": r.get("message"), "expected": StepOutcome.from_wire(r.get("expected")),
            "actual": StepOutcome.from_wire(r.get("actual")), "skipped": [int(x) for x in r.get("skipped") or []]}


@dataclass(frozen=True)
class ReplayResult(Generic[H]):
    """What ``client.replay`` answers: the fresh sandbox (kept), the steps applied, and where they diverged.

    ``reason`` of a divergence: ``exit`` (another exit code), ``output`` (the same exit code, other
    bytes), ``timeout`` (it overran its time, or the replay's), ``failed`` (it could not be applied:
    ``message`` says why); ``expected`` is what the step recorded, ``actual`` what the replay got."""

    #: The sandbox the trajectory was replayed in (a new id; its trajectory is its own; kill it when done).
    sandbox: H
    #: Steps applied.
    steps: int
    #: The seq of the first step that diverged, or None when every one gave what it had.
    diverged_at: int | None = None
    reason: str | None = None
    message: str | None = None
    expected: StepOutcome | None = None
    actual: StepOutcome | None = None
    #: Seqs not replayable: content not kept whole (head and tail only), or a command whose end was not recorded.
    skipped: list[int] = field(default_factory=list)

    def map(self, fn: Callable[[H], Any]) -> "ReplayResult[Any]":
        """The same result with the sandbox turned by ``fn`` (the sync client wraps its handle)."""
        return dataclasses.replace(self, sandbox=fn(self.sandbox))


@dataclass(frozen=True)
class RestoreResult(Generic[H]):
    """What ``client.restore`` answers: the sandbox again under its id, from which snapshot, and how the
    steps after it replayed (``diverged_at`` and the rest as in ``ReplayResult``)."""

    #: The sandbox, under its id again, ready.
    sandbox: H
    #: The snapshot it was made from, or None (from its trajectory's header, every step replayed).
    snapshot: str | None
    #: Steps applied after the snapshot's.
    replayed: int
    #: True when every replayed command gave what it had (exit code and outputs).
    matched: bool
    diverged_at: int | None = None
    reason: str | None = None
    message: str | None = None
    expected: StepOutcome | None = None
    actual: StepOutcome | None = None
    skipped: list[int] = field(default_factory=list)

    def map(self, fn: Callable[[H], Any]) -> "RestoreResult[Any]":
        """The same result with the sandbox turned by ``fn``."""
        return dataclasses.replace(self, sandbox=fn(self.sandbox))


async def replay_of(link: Link, sid: str, up_to: int | None, compare: str | None, spec: Mapping[str, Any] | None,
                    handle: Callable[[SandboxView], H], d: ReplayDefaults = REPLAY_DEFAULTS) -> ReplayResult[H]:
    """Replays sandbox ``sid``'s trajectory in a new sandbox (up to seq ``up_to``; ``compare`` ``exit`` or ``output``)."""
    msg: dict[str, Any] = {"type": "replay", "id": sid}
    if up_to is not None:
        msg["upTo"] = up_to
    if compare is not None:
        if compare not in COMPARE_MODES:
            raise invalid("compare", f"compare is one of {', '.join(COMPARE_MODES)}, got {compare!r}")
        msg["compare"] = compare
    if spec:
        msg["spec"] = camel_spec(spec)
    # Not idempotent (each makes a sandbox): never sent again by itself.
    r = await link.request(msg, d.replay_timeout_s)
    return ReplayResult(handle(SandboxView.from_wire(r["sandbox"])), int(r.get("steps") or 0), **_divergence(r))


async def restore_of(link: Link, sid: str, handle: Callable[[SandboxView], H],
                     d: ReplayDefaults = REPLAY_DEFAULTS) -> RestoreResult[H]:
    """Brings sandbox ``sid`` back under its id from its latest snapshot and the steps after it."""
    r = await link.request({"type": "restore", "id": sid}, d.replay_timeout_s)
    return RestoreResult(handle(SandboxView.from_wire(r["sandbox"])), r.get("snapshot"), int(r.get("replayed") or 0),
                         bool(r.get("matched")), **_divergence(r))
