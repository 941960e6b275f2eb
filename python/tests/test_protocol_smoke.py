"""The wire itself, with raw websockets + msgpack only (no SDK): what any client in any
language meets first. When these fail, the SDK's tests cannot pass either."""
from __future__ import annotations

import websockets

from cluster import Cluster
from rawlink import RawLink, WireError, decode_all, encode


async def test_auth_v1_is_welcomed_and_list_answers_a_list(cluster: Cluster) -> None:
    link = await RawLink.open(cluster.url, cluster.token)
    try:
        assert link.welcome["v"] == 1
        assert link.welcome["resumed"] is False
        assert isinstance(link.welcome["session"], str) and link.welcome["session"]
        views = await link.request({"type": "list"})
        assert isinstance(views, list)
    finally:
        await link.close()


async def test_a_refused_token_is_unauthenticated_and_closes_4401(cluster: Cluster) -> None:
    ws = await websockets.connect(cluster.url)
    try:
        await ws.send(encode({"k": "auth", "token": "wrn_not-a-key", "v": 1}))
        frames = decode_all(await ws.recv())
        assert frames[0]["k"] == "error"
        assert frames[0]["err"]["code"] == "WARREN_ERR_UNAUTHENTICATED"
        await ws.wait_closed()
        assert ws.close_code == 4401
    finally:
        await ws.close()


async def test_an_unknown_protocol_version_names_v_and_closes_4426(cluster: Cluster) -> None:
    try:
        await RawLink.open(cluster.url, cluster.token, v=2)
    except WireError as e:
        assert e.code == "WARREN_ERR_PROTOCOL_VERSION"
        assert e.details["field"] == "v"
        assert 1 in e.details["supported"]
    else:
        raise AssertionError("protocol v2 was welcomed")


async def test_a_bad_request_field_is_invalid_argument_naming_it_and_the_session_lives_on(cluster: Cluster) -> None:
    link = await RawLink.open(cluster.url, cluster.token)
    try:
        try:
            await link.request({"type": "info", "id": 42})
        except WireError as e:
            assert e.code == "WARREN_ERR_INVALID_ARGUMENT"
            assert e.details["field"] == "id"
        else:
            raise AssertionError("info with a numeric id was answered")
        assert isinstance(await link.request({"type": "list"}), list)
    finally:
        await link.close()


async def test_another_tenants_key_sees_none_of_this_tenants_sandboxes(cluster: Cluster) -> None:
    link = await RawLink.open(cluster.url, cluster.token)
    other = await RawLink.open(cluster.url, cluster.key("py-smoke-other"))
    try:
        view = await link.request({"type": "create", "spec": {"backend": "function", "ttlMs": 60_000, "labels": {"test": "smoke"}}})
        try:
            assert view["state"] == "ready"
            try:
                await other.request({"type": "info", "id": view["id"]})
            except WireError as e:
                assert e.code == "WARREN_ERR_NOT_FOUND"
            else:
                raise AssertionError("another tenant read this tenant's sandbox")
            assert view["id"] not in [v["id"] for v in await other.request({"type": "list", "all": True})]
        finally:
            gone = await link.request({"type": "kill", "id": view["id"]})
            assert gone["state"] == "gone"
    finally:
        await link.close()
        await other.close()
