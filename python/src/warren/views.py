"""Plain records the cluster answers with, and the spec's snake_case to camelCase mapping."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .errors import invalid

#: Spec keys as the Python SDK takes them -> as the wire spells them.
_SPEC_KEYS = {"backend": "backend", "ttl_ms": "ttlMs", "idle_timeout_ms": "idleTimeoutMs", "labels": "labels",
              "env": "env", "limits": "limits", "image": "image", "network": "network", "snapshot": "snapshot",
              "paused_ttl": "pausedTtl", "deterministic": "deterministic"}
_LIMIT_KEYS = {"cpus": "cpus", "memory_mib": "memoryMiB", "disk_mib": "diskMiB", "pids": "pids"}
_DETERMINISTIC_KEYS = {"hostname": "hostname", "tz": "tz", "lang": "lang", "source_date_epoch": "sourceDateEpoch",
                       "seed": "seed"}


def camel_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A create spec in wire form; an unknown key is refused here naming it (the cluster would say BAD_SPEC)."""
    out: dict[str, Any] = {}
    for k, v in spec.items():
        if v is None:
            continue
        wire = _SPEC_KEYS.get(k)
        if wire is None:
            # Wire spellings are accepted too, so a spec copied from the TS docs works; anything else the cluster refuses.
            wire = k
        if wire == "limits" and isinstance(v, Mapping):
            v = {_LIMIT_KEYS.get(lk, lk): lv for lk, lv in v.items() if lv is not None}
        elif wire == "deterministic" and isinstance(v, Mapping):
            v = {_DETERMINISTIC_KEYS.get(dk, dk): dv for dk, dv in v.items() if dv is not None}
        out[wire] = v
    return out


def check_positive_int(name: str, value: Any, minimum: int = 0) -> int:
    """``value`` as an int >= minimum, else InvalidArgumentError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise invalid(name, f"{name} must be an integer >= {minimum}")
    return value


@dataclass(frozen=True)
class SandboxView:
    """The control plane's record of a sandbox."""

    id: str
    state: str
    backend: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    node_id: str | None = None
    created_at: int = 0
    expires_at: int = 0
    reason: str | None = None
    message: str | None = None
    #: While ``hibernated``: the snapshot it resumes from.
    snapshot: str | None = None

    @staticmethod
    def from_wire(v: Mapping[str, Any]) -> "SandboxView":
        return SandboxView(str(v.get("id")), str(v.get("state")), str(v.get("backend", "")), dict(v.get("labels") or {}),
                           v.get("nodeId"), int(v.get("createdAt") or 0), int(v.get("expiresAt") or 0),
                           v.get("reason"), v.get("message"), v.get("snapshot"))

    def with_state(self, state: str, reason: str | None = None, message: str | None = None) -> "SandboxView":
        # Only a hibernated sandbox has a snapshot to resume from: any other state drops it.
        return SandboxView(self.id, state, self.backend, self.labels, self.node_id, self.created_at, self.expires_at,
                           reason if reason is not None else self.reason, message if message is not None else self.message,
                           self.snapshot if state == "hibernated" else None)


@dataclass(frozen=True)
class SnapshotView:
    """A snapshot of a sandbox's file system: create from it with ``client.create(snapshot=id or name)``."""

    id: str
    sandbox_id: str
    backend: str
    #: The whole layer stack, bottom first: the sandbox's layers as it had them, then the new one's digest.
    layers: list[str]
    #: The new layer's size.
    bytes: int
    created_at: int
    #: ``name:tag``, when it has one.
    name: str | None = None
    #: The snapshot the sandbox was made from.
    parent: str | None = None
    #: True for a memory snapshot (microvm): its last entry is the VM's saved state, and
    #: sandboxes made from it go on running its processes.
    memory: bool = False

    @staticmethod
    def from_wire(v: Mapping[str, Any]) -> "SnapshotView":
        return SnapshotView(str(v.get("id")), str(v.get("sandboxId")), str(v.get("backend", "")),
                            [str(x) for x in v.get("layers") or []], int(v.get("bytes") or 0), int(v.get("createdAt") or 0),
                            v.get("name"), v.get("parent"), v.get("memory") is True)


@dataclass(frozen=True)
class KillOutcome:
    """One sandbox's answer to a kill by ids or labels."""

    id: str
    ok: bool
    killed: bool = False
    state: str | None = None
    reason: str | None = None
    error: Any = None

    @staticmethod
    def from_wire(o: Mapping[str, Any]) -> "KillOutcome":
        from .errors import from_wire
        err = o.get("error")
        return KillOutcome(str(o.get("id")), bool(o.get("ok")), bool(o.get("killed", False)), o.get("state"),
                           o.get("reason"), from_wire(err) if err is not None else None)


ENDED_STATES = frozenset({"gone", "failed"})
