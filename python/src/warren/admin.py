"""Administration (an admin key's): API keys with an expiry, listed, revoked; the admin key rotated;
tenants' quotas set and read. Thin requests over the client's link; ``AsyncClient`` and ``Client``
expose them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from .errors import invalid

#: Keys asked for per ``token-list`` page (the control plane answers at most 1,000).
KEYS_PER_PAGE = 1000
#: A key's life, as the control plane bounds it: 1 s to 10 years, in ms.
MIN_KEY_LIFE_MS = 1000
MAX_KEY_LIFE_MS = 3650 * 86_400_000
#: Quota names as this SDK takes them -> as the wire spells them.
_QUOTA_KEYS = {"max_sandboxes": "maxSandboxes", "creates_per_second": "createsPerSecond", "create_burst": "createBurst",
               "requests_per_second": "requestsPerSecond", "request_burst": "requestBurst",
               "trajectory_bytes": "trajectoryBytes"}


@dataclass(frozen=True)
class KeyView:
    """A key as ``tokens()`` lists it: never its secret or hash. Times are ms since the epoch."""
    id: str
    tenant: str
    scopes: list[str]
    created_at: int
    expires_at: int | None = None
    last_used_at: int | None = None
    #: The cluster's admin key (rotated, never revoked).
    admin: bool = False
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @staticmethod
    def from_wire(m: dict[str, Any]) -> "KeyView":
        return KeyView(id=str(m["id"]), tenant=str(m["tenant"]), scopes=[str(s) for s in m.get("scopes", [])],
                       created_at=int(m["createdAt"]), expires_at=m.get("expiresAt"), last_used_at=m.get("lastUsedAt"),
                       admin=m.get("admin") is True, raw=m)


def token_message(tenant: str, scopes: Sequence[str], expires_in_ms: int | None) -> dict[str, Any]:
    """A ``token-create`` request; an expiry outside 1 s to 10 years is refused here naming ``expires_in_ms``."""
    msg: dict[str, Any] = {"type": "token-create", "tenant": tenant, "scopes": list(scopes)}
    if expires_in_ms is not None:
        if isinstance(expires_in_ms, bool) or not isinstance(expires_in_ms, int) or not MIN_KEY_LIFE_MS <= expires_in_ms <= MAX_KEY_LIFE_MS:
            raise invalid("expires_in_ms", f"expires_in_ms must be an integer from {MIN_KEY_LIFE_MS} (1 s) to {MAX_KEY_LIFE_MS} (10 years)")
        msg["expiresInMs"] = expires_in_ms
    return msg


async def list_tokens(link: Any, tenant: str | None = None) -> list[KeyView]:
    """Every key (of ``tenant`` when given), in id order, a page at a time."""
    out: list[KeyView] = []
    after: str | None = None
    while True:
        msg: dict[str, Any] = {"type": "token-list", "limit": KEYS_PER_PAGE}
        if tenant is not None:
            msg["tenant"] = tenant
        if after is not None:
            msg["after"] = after
        page: list[dict[str, Any]] = await link.request(msg, retry=True)
        out.extend(KeyView.from_wire(k) for k in page)
        if len(page) < KEYS_PER_PAGE:
            return out
        after = str(page[-1]["id"])


def quota_message(tenant: str, given: dict[str, Any]) -> dict[str, Any]:
    """A ``tenant-quotas`` request setting the quotas given (snake_case or the wire's camelCase)."""
    quotas = {_QUOTA_KEYS.get(k, k): v for k, v in given.items() if v is not None}
    if not quotas:
        raise invalid("quotas", f"set_quotas needs at least one of {', '.join(_QUOTA_KEYS)}")
    return {"type": "tenant-quotas", "tenant": tenant, "quotas": quotas}
