"""Lifecycle calls of AsyncClient and Sandbox against a real cluster, and their refusals."""
from __future__ import annotations

import pytest

import warren
from support import connect, label, run


def test_create_info_list_set_ttl_and_kill_a_sandbox(cluster):
    async def body():
        async with await connect(cluster) as c:
            mine = label()
            sb = await c.create(backend="container", labels=mine, ttl_ms=600_000)
            try:
                assert sb.state == "ready" and len(sb.id) == 16
                assert (await sb.info()).labels == mine
                assert [v.id for v in await c.list(labels=mine)] == [sb.id]
                before = sb.view.expires_at
                expires = await sb.set_ttl(1_000_000)
                assert expires > before
            finally:
                await sb.kill()
            assert sb.state == "gone"
            assert await c.list(labels=mine) == []
            assert [v.id for v in await c.list(labels=mine, all=True)] == [sb.id]
    run(body)


def test_create_many_then_kill_by_labels_answers_one_outcome_each(cluster):
    async def body():
        async with await connect(cluster) as c:
            mine = label()
            sbs = await c.create_many(5, backend="container", labels=mine)
            assert len({s.id for s in sbs}) == 5
            outcomes = await c.kill(labels=mine)
            assert sorted(o.id for o in outcomes) == sorted(s.id for s in sbs)
            assert all(o.ok and o.killed and o.state == "gone" for o in outcomes)
            again = await c.kill([s.id for s in sbs] + ["0000000000000000"])
            assert [o.killed for o in again[:5]] == [False] * 5
            assert isinstance(again[5].error, warren.NotFoundError)
    run(body)


def test_kill_by_labels_ends_them_all_past_the_thousand_one_request_ends(cluster):
    async def body():
        async with await connect(cluster) as c:
            mine = label()
            sbs = await c.create_many(1000, backend="function", labels=mine)
            sbs.append(await c.create(backend="function", labels=mine))
            outcomes = await c.kill(labels=mine)
            assert len(outcomes) == 1001
            assert {o.id for o in outcomes} == {s.id for s in sbs}
            assert await c.list(labels=mine) == []
    run(body)


def test_attach_finds_a_sandbox_by_id_and_refuses_an_unknown_one(cluster):
    async def body():
        async with await connect(cluster) as c:
            sb = await c.create(backend="container", labels=label())
            try:
                async with await connect(cluster) as other:
                    again = await other.attach(sb.id)
                    assert (await again.exec("echo hi")).stdout == "hi\n"
                with pytest.raises(warren.NotFoundError):
                    await c.attach("zzzzzzzzzzzzzzzz")
            finally:
                await sb.kill()
    run(body)


def test_another_tenants_sandbox_is_not_found(cluster):
    async def body():
        async with await connect(cluster) as mine, await connect(cluster, cluster.admin_token) as admin:
            key = await admin.create_token("py-other", ["sandbox:create", "sandbox:exec", "sandbox:read"])
            sb = await mine.create(backend="container", labels=label())
            try:
                async with await connect(cluster, key) as other:
                    with pytest.raises(warren.NotFoundError):
                        await other.attach(sb.id)
                    [outcome] = await other.kill([sb.id])
                    assert not outcome.ok and outcome.error.code == "WARREN_ERR_NOT_FOUND"
                assert (await sb.info()).state == "ready"  # left alone
            finally:
                await sb.kill()
    run(body)


def test_bad_spec_and_bad_arguments_name_their_field(cluster):
    async def body():
        async with await connect(cluster) as c:
            with pytest.raises(warren.BadSpecError) as e:
                await c.create(backend="container", limits={"memory_mib": -5})
            assert e.value.code == "WARREN_ERR_BAD_SPEC" and e.value.field == "limits.memoryMiB"
            with pytest.raises(warren.BadSpecError) as e:
                await c.create(backend="nope")
            assert e.value.field == "backend"
            with pytest.raises(warren.InvalidArgumentError) as e:
                await c.create_many(0)
            assert e.value.field == "count"
            with pytest.raises(warren.InvalidArgumentError) as e:
                await c.request({"type": "info", "id": 5})
            assert e.value.field == "id"
            sb = await c.create(backend="container", labels=label())
            try:
                with pytest.raises(warren.InvalidArgumentError) as e:
                    await sb.set_ttl(8 * 86_400_000)  # past the 7-day maximum
                assert e.value.field == "ttlMs" and "max" in e.value.details
            finally:
                await sb.kill()
            with pytest.raises(warren.SandboxGoneError):
                await sb.exec("true")
    run(body)


def test_a_refused_token_is_unauthenticated_and_not_retried(cluster):
    async def body():
        with pytest.raises(warren.UnauthenticatedError):
            await warren.AsyncClient.connect(cluster.url, "wrn_nope_nope", connect_timeout_s=5)
    run(body, 10)


def test_a_key_without_the_scope_is_forbidden(cluster):
    async def body():
        async with await connect(cluster, cluster.admin_token) as admin:
            key = await admin.create_token("py-reader", ["sandbox:read"])
        async with await connect(cluster, key) as reader:
            with pytest.raises(warren.ForbiddenError) as e:
                await reader.create(backend="container")
            assert e.value.details.get("scope") == "sandbox:create"
    run(body)


def test_the_audit_log_records_a_create_and_only_an_admin_reads_it(cluster):
    async def body():
        async with await connect(cluster, cluster.token) as tenant:
            sb = await tenant.create(backend="function", labels=label())
            await sb.kill()
            with pytest.raises(warren.ForbiddenError) as e:
                await tenant.audit()
            assert e.value.details.get("scope") == "admin"
        async with await connect(cluster, cluster.admin_token) as admin:
            page = await admin.audit(sandbox=sb.id)
            assert [(r["action"], r["outcome"]) for r in page["records"]] == [("sandbox.create", "ok"), ("sandbox.kill", "ok")]
            with pytest.raises(warren.InvalidArgumentError) as bad:
                await admin.audit(limit=0)
            assert bad.value.details.get("field") == "limit"
    run(body)


def test_an_unreachable_cluster_is_connection_closed_within_the_connect_timeout(cluster):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused

        async def body():
            with pytest.raises(warren.ConnectionClosedError) as e:
                await warren.AsyncClient.connect(f"ws://127.0.0.1:{port}", "wrn_x", connect_timeout_s=1)
            assert e.value.details.get("timeoutMs") == 1000
        run(body, 10)


def test_an_unknown_spec_key_is_a_bad_spec(cluster):
    async def body():
        async with await connect(cluster) as c:
            with pytest.raises(warren.BadSpecError) as e:
                await c.create(backend="container", colour="red")
            assert e.value.field == "colour"
    run(body)


def test_cluster_stats_is_admins_and_counts_creations(cluster):
    async def body():
        async with await connect(cluster) as mine, await connect(cluster, cluster.admin_token) as admin:
            sb = await mine.create(backend="container", labels=label())
            try:
                stats = await admin.cluster_stats(window_sec=60)
                assert len(stats["creations"]) == 60
                assert sum(p["created"] for p in stats["creations"]) >= 1
                assert stats["nodes"] and all("capacity" in n and "usage" in n for n in stats["nodes"])
                with pytest.raises(warren.InvalidArgumentError):
                    await admin.cluster_stats(window_sec=601)
                with pytest.raises(warren.ForbiddenError):
                    await mine.cluster_stats()
            finally:
                await sb.kill()
    run(body)
