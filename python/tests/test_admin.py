"""Administration through the Python SDK (async and sync): keys with an expiry, listed without
secrets, revoked (an open session is closed), the admin key rotated; quotas set and read; the
bounds of each field named; a tenant key refused."""
from __future__ import annotations

import asyncio
import re

import pytest

import warren
from cluster import Cluster, TENANT_SCOPES


def key_id(token: str) -> str:
    m = re.match(r"^wrn_([0-9a-z]{12})_", token)
    assert m is not None
    return m.group(1)


async def ended(c: warren.AsyncClient) -> None:
    """Waits until the control plane ended the client's link for good (its runner returns)."""
    runner = c.link._runner
    assert runner is not None
    await asyncio.wait_for(asyncio.shield(runner), 10)


async def test_an_expiring_key_and_a_revoked_one_have_their_open_sessions_closed(cluster: Cluster) -> None:
    async with await warren.AsyncClient.connect(cluster.url, cluster.admin_token) as root:
        short = await root.create_token("py-adm", ["sandbox:read"], expires_in_ms=1000)
        user = await warren.AsyncClient.connect(cluster.url, short)
        try:
            await user.list()
            await ended(user)
            with pytest.raises(warren.UnauthenticatedError) as e:
                await user.list()
            assert e.value.details.get("reason") == "expired"
        finally:
            await user.close()

        long = await root.create_token("py-adm", TENANT_SCOPES)
        user = await warren.AsyncClient.connect(cluster.url, long)
        try:
            assert await root.revoke_token(key_id(long)) == {"id": key_id(long), "revoked": True}
            await ended(user)
            with pytest.raises(warren.UnauthenticatedError) as e:
                await user.list()
            assert e.value.details.get("reason") == "revoked"
        finally:
            await user.close()
        with pytest.raises(warren.UnauthenticatedError):
            await warren.AsyncClient.connect(cluster.url, long)
        with pytest.raises(warren.NotFoundError) as nf:
            await root.revoke_token(key_id(long))
        assert nf.value.field == "id"


def test_tokens_list_ids_and_times_never_secrets_and_bounds_are_named(cluster: Cluster) -> None:
    with warren.Client.connect(cluster.url, cluster.admin_token) as root:
        token = root.create_token("py-ls", ["sandbox:read", "sandbox:exec"], expires_in_ms=86_400_000)
        keys = root.tokens("py-ls")
        assert [k.id for k in keys] == [key_id(token)]
        k = keys[0]
        assert (k.tenant, sorted(k.scopes), k.admin) == ("py-ls", ["sandbox:exec", "sandbox:read"], False)
        assert k.expires_at is not None and k.expires_at > k.created_at
        everything = repr(root.tokens()) + repr([x.raw for x in root.tokens()])
        assert token[17:] not in everything and cluster.admin_token[17:] not in everything
        assert any(x.admin for x in root.tokens())
        for bad in (0, 999, 3650 * 86_400_000 + 1, 1.5, True):
            with pytest.raises(warren.InvalidArgumentError) as e:
                root.create_token("py-ls", ["sandbox:read"], expires_in_ms=bad)  # type: ignore[arg-type]
            assert e.value.field == "expires_in_ms"
        with pytest.raises(warren.InvalidArgumentError) as e:
            root.revoke_token("not-a-key-id")
        assert e.value.field == "id"


def test_quotas_are_set_and_read_live_and_checked(cluster: Cluster) -> None:
    with warren.Client.connect(cluster.url, cluster.admin_token) as root:
        with pytest.raises(warren.NotFoundError) as nf:
            root.quotas("py-q-new")
        assert nf.value.field == "tenant"
        assert root.set_quotas("py-q-new", max_sandboxes=0)["maxSandboxes"] == 0
        assert root.quotas("py-q-new") == {"maxSandboxes": 0, "createsPerSecond": 20000, "createBurst": 20000,
                                           "requestsPerSecond": 10000, "requestBurst": 20000, "trajectoryBytes": 64 << 30}
        with warren.Client.connect(cluster.url, root.create_token("py-q-new", TENANT_SCOPES)) as user:
            with pytest.raises(warren.QuotaError):
                user.create(backend="function")
        for kw, field in (({"max_sandboxes": -1}, "quotas.maxSandboxes"), ({"max_sandboxes": 10**9 + 1}, "quotas.maxSandboxes"),
                          ({"creates_per_second": 0}, "quotas.createsPerSecond"), ({"create_burst": 0}, "quotas.createBurst"),
                          ({"requests_per_second": 0}, "quotas.requestsPerSecond"), ({"request_burst": 0.5}, "quotas.requestBurst"),
                          ({"trajectory_bytes": -1}, "quotas.trajectoryBytes"), ({"trajectory_bytes": 1.5}, "quotas.trajectoryBytes")):
            with pytest.raises(warren.InvalidArgumentError) as e:
                root.set_quotas("py-q-new", **kw)
            assert e.value.field == field
        with pytest.raises(warren.InvalidArgumentError) as e:
            root.set_quotas("py-q-new")
        assert e.value.field == "quotas"
        assert root.set_quotas("py-q-new", max_sandboxes=7, creates_per_second=2.5, create_burst=3) == \
            {"maxSandboxes": 7, "createsPerSecond": 2.5, "createBurst": 3, "requestsPerSecond": 10000, "requestBurst": 20000,
             "trajectoryBytes": 64 << 30}
        assert root.set_quotas("py-q-new", trajectory_bytes=1 << 30)["trajectoryBytes"] == 1 << 30


def test_a_tenant_past_its_request_rate_gets_quota_requests_until_it_is_raised(cluster: Cluster) -> None:
    with warren.Client.connect(cluster.url, cluster.admin_token) as root:
        # One request in 1,000 s after a burst of 4: nothing drips in while the test runs.
        assert root.set_quotas("py-rate", requests_per_second=0.001, request_burst=4)["requestBurst"] == 4
        with warren.Client.connect(cluster.url, root.create_token("py-rate", TENANT_SCOPES)) as user:
            passed = 0
            with pytest.raises(warren.QuotaError) as e:
                for _ in range(20):
                    user.list()
                    passed += 1
            assert passed == 4
            assert e.value.details["quota"] == "requests"
            assert e.value.details["retryAfterMs"] > 0
            root.set_quotas("py-rate", requests_per_second=1000)
            assert user.list() == []


def test_a_request_refused_for_the_rate_is_sent_again_after_its_retry_after_and_zero_wait_raises_it(cluster: Cluster) -> None:
    with warren.Client.connect(cluster.url, cluster.admin_token) as root:
        root.set_quotas("py-paced", requests_per_second=10, request_burst=2)
        key = root.create_token("py-paced", TENANT_SCOPES)

        async def burst(defaults: warren.LinkDefaults) -> list[object]:
            async with await warren.AsyncClient.connect(cluster.url, key, defaults=defaults) as c:
                async def one() -> object:
                    try:
                        return await c.list()
                    except warren.WarrenError as err:
                        return err
                return list(await asyncio.gather(*(one() for _ in range(12))))

        # 12 at once against a burst of 2 and 10 a second: every one answered.
        assert asyncio.run(burst(warren.LinkDefaults())) == [[]] * 12
        refused = [r for r in asyncio.run(burst(warren.LinkDefaults(rate_limit_wait_s=0))) if isinstance(r, warren.WarrenError)]
        assert refused and all(isinstance(r, warren.QuotaError) and r.details["quota"] == "requests" for r in refused)


def test_a_tenant_key_is_refused_administration(cluster: Cluster) -> None:
    with warren.Client.connect(cluster.url, cluster.token) as user:
        for call in (lambda: user.tokens(), lambda: user.revoke_token("000000000000"), lambda: user.rotate_admin_key(),
                     lambda: user.set_quotas("py-a", max_sandboxes=10**9), lambda: user.quotas("py-a")):
            with pytest.raises(warren.ForbiddenError) as e:
                call()
            assert e.value.details.get("scope") == "admin"


async def test_rotating_the_admin_key_ends_the_old_one(cluster: Cluster) -> None:
    old = cluster.admin_token
    root = await warren.AsyncClient.connect(cluster.url, old)
    try:
        new = await root.rotate_admin_key()
        # The rest of the session's tests mint keys with the new one.
        cluster.admin_token = new
        await ended(root)
    finally:
        await root.close()
    with pytest.raises(warren.UnauthenticatedError):
        await warren.AsyncClient.connect(cluster.url, old)
    async with await warren.AsyncClient.connect(cluster.url, new) as again:
        assert [k.id for k in await again.tokens("admin") if k.admin] == [key_id(new)]
