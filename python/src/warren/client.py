"""The async client: one reconnecting link to a control plane and a handle per sandbox.

    async with await warren.AsyncClient.connect() as client:
        sb = await client.create(backend="container")
        r = await sb.exec("echo hi")
"""
from __future__ import annotations

import os
import weakref
from typing import Any, AsyncIterator, Mapping, Sequence, Union

from .admin import KeyView, list_tokens, quota_message, token_message
from .config import resolve_config
from .errors import invalid
from .link import CLIENT_ADDRESS, DEFAULTS, Link, LinkDefaults
from .sandbox import KILL_TIMEOUT_S, Sandbox, SandboxRef
from .replay import ReplayResult, RestoreResult, replay_of, restore_of
from .snapshots import delete_snapshot, list_snapshots, resume_of
from .trajectory import RecordedBytes, Step, TrajectoryPage, all_steps, read_blob, read_page, recorded_bytes
from .views import ENDED_STATES, KillOutcome, SandboxView, SnapshotView, camel_spec

#: Sandboxes one kill request ends at most (the control plane's bound).
MAX_KILL = 1000

CREATE_DEADLINE_MS = 10_000


class AsyncClient:
    """A connection to one control plane with one API key."""

    def __init__(self, link: Link) -> None:
        self._link = link
        # Handles are weak: a handle the caller dropped needs no more notices.
        self._handles: "weakref.WeakValueDictionary[str, Sandbox]" = weakref.WeakValueDictionary()

    @classmethod
    async def connect(cls, url: str | None = None, token: str | None = None, *, connect_timeout_s: float = 10.0,
                      defaults: LinkDefaults = DEFAULTS, ca: "str | os.PathLike[str] | None" = None) -> "AsyncClient":
        """Connects (url/token default to WARREN_URL/WARREN_TOKEN, then ~/.warren/config.json).

        ``ca``: for a ``wss://`` control plane whose certificate the system does not trust, the CA
        that signed it (a PEM file's path, or PEM text; default WARREN_CA, then the config file).
        An untrusted certificate raises ConnectionClosedError (``details["reason"] == "tls"``) at once.
        """
        cfg = resolve_config(url, token, None if ca is None else os.fspath(ca))
        client: AsyncClient | None = None

        def on_tell(to: str, m: Any) -> None:
            if to == CLIENT_ADDRESS and client is not None:
                client._notice(m)

        link = Link(cfg.url, cfg.token, on_tell, defaults, cfg.ca)
        client = cls(link)
        await link.connect(connect_timeout_s)
        return client

    @property
    def url(self) -> str:
        return self._link.url

    @property
    def link(self) -> Link:
        """The underlying link (for tests and tools)."""
        return self._link

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connection; sandboxes live on until their TTL or a kill."""
        await self._link.close()

    async def request(self, message: Mapping[str, Any], timeout_s: float | None = None, retry: bool = False) -> Any:
        """Sends one raw session request (docs/protocol.md) and returns its reply."""
        return await self._link.request(dict(message), timeout_s, retry)

    async def create(self, *, deadline_ms: int | None = None, **spec: Any) -> Sandbox:
        """Creates one sandbox and waits until it is ready.

        Spec keys in snake_case: ``backend``, ``ttl_ms``, ``limits``, ``image``, ``env``, ``labels``,
        ``network``, ``paused_ttl`` (False: paused time does not count against the TTL),
        ``deterministic`` (True, or ``{hostname, tz, lang, source_date_epoch, seed}``), ``snapshot``
        (a snapshot id or ``name:tag`` to start from: its files and its spec, the fields given here
        laid over it; no ``image`` beside it)."""
        view = await self._link.request(self._create_message(spec, None, deadline_ms), self._create_timeout(deadline_ms))
        return self._handle(SandboxView.from_wire(view))

    async def create_many(self, n: int, *, deadline_ms: int | None = None, **spec: Any) -> list[Sandbox]:
        """Creates ``n`` sandboxes of one spec in one request; all or nothing (the first error is raised)."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 1000:
            raise invalid("count", "n must be an integer from 1 to 1000")
        views = await self._link.request(self._create_message(spec, n, deadline_ms), self._create_timeout(deadline_ms) * 2)
        return [self._handle(SandboxView.from_wire(v)) for v in views]

    async def attach(self, target: Union[str, SandboxRef, Sandbox]) -> Sandbox:
        """The handle of an existing sandbox, by id or by a (possibly unpickled) handle.

        A hibernated sandbox is resumed first (created again from its snapshot, with the same id)."""
        sid = target if isinstance(target, str) else target.id
        view = SandboxView.from_wire(await self._link.request({"type": "info", "id": sid}, 10.0, retry=True))
        if view.state == "hibernated":
            view = await resume_of(self._link, sid)
        return self._handle(view)

    async def snapshots(self, *, sandbox_id: str | None = None, limit: int | None = None) -> list[SnapshotView]:
        """The tenant's snapshots, newest first (only those cut from ``sandbox_id`` when given; at most 200)."""
        return await list_snapshots(self._link, sandbox_id, limit)

    async def delete_snapshot(self, id_or_name: str) -> str:
        """Deletes a snapshot (by id or ``name:tag``) and returns its id. Sandboxes made from it live on;
        its layers leave the blob store once nothing uses them. ``NotFoundError`` naming ``id`` for one
        the tenant has not."""
        return await delete_snapshot(self._link, id_or_name)

    async def list(self, *, labels: Mapping[str, str] | None = None, state: str | None = None, all: bool = False,
                   limit: int | None = None) -> list[SandboxView]:
        """The tenant's live sandboxes (ended ones too with ``all``, or only those in ``state``)."""
        msg: dict[str, Any] = {"type": "list"}
        if labels is not None:
            msg["labels"] = dict(labels)
        if state is not None:
            msg["state"] = state
        if all:
            msg["all"] = True
        if limit is not None:
            msg["limit"] = limit
        return [SandboxView.from_wire(v) for v in await self._link.request(msg, None, retry=True)]

    async def kill(self, ids: Sequence[str | Sandbox] | None = None, *, labels: Mapping[str, str] | None = None) -> list[KillOutcome]:
        """Kills sandboxes by id or handle (at most 1,000, one request), or every live one with all of
        ``labels`` (1,000 a request, asked again while a request ends that many); one outcome each, once
        each has ended."""
        if (ids is None) == (labels is None):
            raise invalid("ids", "kill takes ids or labels, not both and not neither")
        if ids is not None:
            if isinstance(ids, (str, Sandbox)):
                ids = [ids]
            return await self._kill_once({"type": "kill", "ids": [i if isinstance(i, str) else i.id for i in ids]})
        out: list[KillOutcome] = []
        while True:
            page = await self._kill_once({"type": "kill", "labels": dict(labels or {})})
            out.extend(page)
            # A full page may have left more behind; a page that killed none would only repeat itself.
            if len(page) < MAX_KILL or not any(o.ok and o.killed for o in page):
                return out

    async def _kill_once(self, msg: dict[str, Any]) -> list[KillOutcome]:
        outcomes = [KillOutcome.from_wire(o) for o in await self._link.request(msg, KILL_TIMEOUT_S + 10, retry=True)]
        for o in outcomes:
            h = self._handles.get(o.id)
            if h is not None and o.ok and o.state is not None:
                h._notice(o.state, o.reason, None)
        return outcomes

    async def trajectory(self, id: str, *, from_seq: int | None = None, limit: int | None = None) -> TrajectoryPage:
        """A page of sandbox ``id``'s trajectory (its header from seq 0, then at most ``limit``, 200, steps),
        also after the sandbox has ended (for the cluster's retention, 7 days by default).
        ``NotFoundError`` for a sandbox this tenant never had."""
        return await read_page(self._link, id, from_seq, limit)

    def steps(self, id: str) -> AsyncIterator[Step]:
        """Every step of sandbox ``id``'s trajectory recorded so far, in order: ``async for s in client.steps(id)``
        (it reads a page at a time)."""
        return all_steps(self._link, id)

    async def trajectory_blob(self, id: str, digest: str, size: int | None = None) -> bytes:
        """The bytes of a blob sandbox ``id``'s trajectory recorded (a ``RecordedBytes.blob``), read in ranges;
        give ``size`` (its ``RecordedBytes.bytes``) to read exactly that many. ``NotFoundError`` naming
        ``digest`` for one the trajectory does not reference."""
        return await read_blob(self._link, id, digest, size)

    async def recorded(self, id: str, r: RecordedBytes) -> bytes | None:
        """All the bytes a step of sandbox ``id`` recorded (``step.stdout``, ``step.content``...): inline, or
        read from the blob store; None when they were not kept whole (only head, tail, count and sha256)."""
        return await recorded_bytes(self._link, id, r)

    async def replay(self, id: str, *, up_to: int | None = None, compare: str | None = None,
                     spec: Mapping[str, Any] | None = None) -> ReplayResult[Sandbox]:
        """Replays sandbox ``id``'s trajectory in a new sandbox (same tenant, from the header's layers and spec;
        ``spec`` may give ``labels`` and ``ttl_ms``): its steps in order up to seq ``up_to``, each command
        compared with the one recorded (``compare`` ``"exit"``: exit codes; ``"output"``, the default: exit
        codes and the sha256 of stdout and stderr), stopping at the first that differs. The new sandbox is
        kept (``result.sandbox``): kill it when done. Not sent again after a lost socket (it makes a sandbox)."""
        return await replay_of(self._link, id, up_to, compare, spec, self._handle)

    async def restore(self, id: str) -> RestoreResult[Sandbox]:
        """Brings back sandbox ``id`` whose node was lost (or that ended) under its own id: created from its
        latest snapshot, then the steps after that snapshot replayed."""
        return await restore_of(self._link, id, self._handle)

    async def create_token(self, tenant: str, scopes: Sequence[str], *, expires_in_ms: int | None = None) -> str:
        """Admin: issues an API key for ``tenant`` (shown once); ``expires_in_ms`` gives it a life (1 s to 10 years)."""
        key: str = await self._link.request(token_message(tenant, scopes, expires_in_ms))
        return key

    async def tokens(self, tenant: str | None = None) -> list[KeyView]:
        """Admin: every API key (of ``tenant`` when given), in id order: ids, scopes and times, never a secret."""
        return await list_tokens(self._link, tenant)

    async def revoke_token(self, id: str) -> dict[str, Any]:
        """Admin: revokes key ``id`` (the 12 characters after ``wrn_``); sessions open with it are closed at once.
        ``NotFoundError`` for no such key, ``InvalidArgumentError`` for the admin key (rotate it)."""
        r: dict[str, Any] = await self._link.request({"type": "token-revoke", "id": id})
        return r

    async def rotate_admin_key(self) -> str:
        """Admin: a new admin key; the old one stops working (a client on it is closed once this answers)."""
        key: str = await self._link.request({"type": "admin-rotate"})
        return key

    async def set_quotas(self, tenant: str, *, max_sandboxes: int | None = None, creates_per_second: float | None = None,
                         create_burst: float | None = None, requests_per_second: float | None = None,
                         request_burst: float | None = None, trajectory_bytes: int | None = None) -> dict[str, Any]:
        """Admin: sets a tenant's quotas (those given; a new tenant gets the defaults for the rest). Creation
        quotas apply from its next create (sandboxes running over a lowered maximum keep running), request
        rates at once, over all its sessions; past ``trajectory_bytes`` its oldest ended trajectories go first."""
        r: dict[str, Any] = await self._link.request(quota_message(tenant, {
            "max_sandboxes": max_sandboxes, "creates_per_second": creates_per_second, "create_burst": create_burst,
            "requests_per_second": requests_per_second, "request_burst": request_burst, "trajectory_bytes": trajectory_bytes}))
        return r

    async def quotas(self, tenant: str, **quotas: int) -> dict[str, Any]:
        """Admin: a tenant's quotas (``maxSandboxes``, ``createsPerSecond``, ``createBurst``, ``requestsPerSecond``,
        ``requestBurst``, ``trajectoryBytes``); sets those given
        (``set_quotas`` is the clearer way). ``NotFoundError`` for a tenant that does not exist."""
        msg: dict[str, Any] = quota_message(tenant, quotas) if quotas else {"type": "tenant-quotas", "tenant": tenant}
        r: dict[str, Any] = await self._link.request(msg)
        return r

    async def nodes(self) -> list[Any]:
        """Admin: the nodes and their health."""
        r: list[Any] = await self._link.request({"type": "nodes"})
        return r

    async def cluster_stats(self, window_sec: int | None = None) -> dict[str, Any]:
        """Admin: what the live page shows: ``nodes`` (capacity and use), ``layers`` (cache figures) and
        ``creations``, one point a second for the last ``window_sec`` seconds (1 to 600, default 600)."""
        msg: dict[str, Any] = {"type": "cluster-stats"}
        if window_sec is not None:
            msg["windowSec"] = window_sec
        r: dict[str, Any] = await self._link.request(msg)
        return r

    async def audit(self, *, tenant: str | None = None, sandbox: str | None = None, action: str | None = None,
                    since: int | None = None, until: int | None = None, limit: int | None = None) -> dict[str, Any]:
        """Admin: the newest audit records matching the filters (``since``/``until`` in ms since the epoch,
        ``action`` an action or its group, ``limit`` 1-1000), oldest first: ``{"records": [...], "truncated": bool}``."""
        msg: dict[str, Any] = {"type": "audit-query"}
        for k, v in (("tenant", tenant), ("sandbox", sandbox), ("action", action), ("since", since), ("until", until), ("limit", limit)):
            if v is not None:
                msg[k] = v
        r: dict[str, Any] = await self._link.request(msg)
        return r

    def _create_message(self, spec: Mapping[str, Any], count: int | None, deadline_ms: int | None) -> dict[str, Any]:
        msg: dict[str, Any] = {"type": "create", "spec": camel_spec(spec)}
        if count is not None:
            msg["count"] = count
        if deadline_ms is not None:
            msg["deadlineMs"] = deadline_ms
        return msg

    def _create_timeout(self, deadline_ms: int | None) -> float:
        d = deadline_ms if isinstance(deadline_ms, int) and deadline_ms >= 0 else CREATE_DEADLINE_MS
        return d / 1000 + self._link.d.request_timeout_s

    def _handle(self, view: SandboxView) -> Sandbox:
        known = self._handles.get(view.id)
        if known is not None:
            known.view = view
            return known
        sb = Sandbox(self._link, view, self._handle)
        self._handles[view.id] = sb
        return sb

    def _notice(self, m: Any) -> None:
        if not isinstance(m, dict) or m.get("type") != "sandbox-state":
            return
        h = self._handles.get(str(m.get("id")))
        if h is not None:
            h._notice(str(m.get("state")), m.get("reason"), m.get("message"))
            if h.state in ENDED_STATES:
                self._handles.pop(h.id, None)
