"""Snapshots, fork, pause, resume and hibernate: the requests behind ``sb.snapshot()``, ``sb.fork()``,
``sb.pause()``, ``sb.resume()``, ``sb.hibernate()``, ``client.snapshots()`` and ``client.delete_snapshot()``
(docs/protocol.md, "Snapshots"), with the time each may take in the cluster: a snapshot cuts and
pushes a layer; a fork also places and creates its sandboxes; a resume of a hibernated sandbox
creates it again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Mapping, TypeVar

from .errors import WarrenError, from_wire, invalid
from .link import Link
from .views import SandboxView, SnapshotView, camel_spec

H = TypeVar("H")


@dataclass(frozen=True)
class SnapshotDefaults:
    """How long the client waits for each request (the cluster's own bounds, and a margin)."""

    #: The node's cut and push (the cluster's 120 s) and a margin.
    snapshot_timeout_s: float = 130.0
    #: What a fork or a resume adds for placing and creating sandboxes (the node's 60 s create, and a margin).
    create_timeout_s: float = 70.0
    #: What a hibernate adds for the sandbox's end on its node.
    end_timeout_s: float = 70.0
    #: A pause or resume of a running sandbox: a freeze waits behind a snapshot being cut.
    freeze_timeout_s: float = 65.0
    #: A fork's placement deadline when the spec gives none (as a create's).
    deadline_ms: int = 10_000
    #: Forks one request may make.
    max_fork: int = 1000


SNAPSHOT_DEFAULTS = SnapshotDefaults()


@dataclass(frozen=True)
class ForkItem(Generic[H]):
    """One sandbox a fork was asked for: ``sandbox`` when it was made, else ``error`` says why not."""

    ok: bool
    sandbox: H | None = None
    error: WarrenError | None = None


@dataclass(frozen=True)
class ForkResult(Generic[H]):
    """What ``sb.fork(n)`` answers: the snapshot, and one outcome per sandbox asked for, in order."""

    #: The snapshot the forks were made from; it stays (create from it again with ``create(snapshot=id)``).
    snapshot: SnapshotView
    #: One per sandbox asked for: some may have found no room while the others were made.
    outcomes: list[ForkItem[H]] = field(default_factory=list)

    @property
    def sandboxes(self) -> list[H]:
        """The sandboxes made, in order."""
        return [o.sandbox for o in self.outcomes if o.ok and o.sandbox is not None]

    def map(self, fn: Callable[[H], Any]) -> "ForkResult[Any]":
        """The same result with each sandbox turned by ``fn`` (the sync client wraps its handles)."""
        return ForkResult(self.snapshot, [ForkItem(o.ok, fn(o.sandbox) if o.sandbox is not None else None, o.error)
                                          for o in self.outcomes])


async def snapshot_of(link: Link, sid: str, name: str | None, d: SnapshotDefaults = SNAPSHOT_DEFAULTS,
                      memory: bool = False) -> SnapshotView:
    """Cuts a snapshot of sandbox ``sid`` (named ``name:tag`` when ``name`` is given; the whole VM with ``memory``)."""
    msg: dict[str, Any] = {"type": "snapshot", "id": sid}
    if name is not None:
        msg["name"] = name
    if memory:
        msg["memory"] = True
    # Not idempotent (a second one would cut another snapshot): never sent again by itself.
    return SnapshotView.from_wire(await link.request(msg, d.snapshot_timeout_s))


async def fork_of(link: Link, sid: str, count: int, spec: Mapping[str, Any] | None, deadline_ms: int | None,
                  handle: Callable[[SandboxView], H], d: SnapshotDefaults = SNAPSHOT_DEFAULTS,
                  memory: bool = False) -> ForkResult[H]:
    """Forks sandbox ``sid`` into ``count`` sandboxes, ``spec`` (snake_case, as ``create``'s) laid over its own."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= d.max_fork:
        raise invalid("count", f"count must be an integer from 1 to {d.max_fork}")
    msg: dict[str, Any] = {"type": "fork", "id": sid, "count": count}
    if spec:
        msg["spec"] = camel_spec(spec)
    if deadline_ms is not None:
        msg["deadlineMs"] = deadline_ms
    if memory:
        msg["memory"] = True
    wait = deadline_ms if isinstance(deadline_ms, int) and deadline_ms >= 0 else d.deadline_ms
    answer = await link.request(msg, d.snapshot_timeout_s + wait / 1000 + d.create_timeout_s)
    outcomes: list[ForkItem[H]] = []
    for o in answer.get("outcomes") or []:
        if o.get("ok"):
            outcomes.append(ForkItem(True, handle(SandboxView.from_wire(o["sandbox"]))))
        else:
            outcomes.append(ForkItem(False, None, from_wire(o.get("error"))))
    return ForkResult(SnapshotView.from_wire(answer["snapshot"]), outcomes)


async def pause_of(link: Link, sid: str, d: SnapshotDefaults = SNAPSHOT_DEFAULTS) -> SandboxView:
    """Freezes sandbox ``sid``: its view, state ``paused``."""
    return SandboxView.from_wire(await link.request({"type": "pause", "id": sid}, d.freeze_timeout_s, retry=True))


async def resume_of(link: Link, sid: str, d: SnapshotDefaults = SNAPSHOT_DEFAULTS) -> SandboxView:
    """Thaws sandbox ``sid``, or creates a hibernated one again (same id): its view, state ``ready``."""
    # Idempotent: sent again, it answers the state reached.
    return SandboxView.from_wire(await link.request({"type": "resume", "id": sid}, d.freeze_timeout_s + d.create_timeout_s,
                                                    retry=True))


async def hibernate_of(link: Link, sid: str, d: SnapshotDefaults = SNAPSHOT_DEFAULTS) -> SandboxView:
    """Snapshots sandbox ``sid`` and ends it on its node: its view, state ``hibernated``, ``snapshot`` set."""
    return SandboxView.from_wire(await link.request({"type": "hibernate", "id": sid}, d.snapshot_timeout_s + d.end_timeout_s,
                                                    retry=True))


async def list_snapshots(link: Link, sandbox_id: str | None, limit: int | None) -> list[SnapshotView]:
    """The tenant's snapshots, newest first (of one sandbox with ``sandbox_id``)."""
    msg: dict[str, Any] = {"type": "snapshots"}
    if sandbox_id is not None:
        msg["sandboxId"] = sandbox_id
    if limit is not None:
        msg["limit"] = limit
    return [SnapshotView.from_wire(v) for v in await link.request(msg, None, retry=True)]


async def delete_snapshot(link: Link, id_or_name: str) -> str:
    """Deletes a snapshot by id or name; returns its id."""
    answer = await link.request({"type": "snapshot-delete", "id": id_or_name}, None)
    return str(answer.get("id"))
