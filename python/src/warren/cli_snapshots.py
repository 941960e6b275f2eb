"""``python -m warren`` commands for snapshots, forks, pause and resume, hibernation and
trajectories: snapshot, snapshots, snapshot-rm, fork, pause, resume, hibernate, log."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Awaitable, Callable

from .cli_log import header_line, json_line, step_lines
from .client import AsyncClient
from .views import SnapshotView

Command = Callable[[AsyncClient, argparse.Namespace], Awaitable[int]]


def _snapshot_row(s: SnapshotView) -> str:
    # Columns are padded and always apart, so a long name cannot run into the next one.
    return "  ".join([s.id.ljust(22), (s.name or "-").ljust(24), s.sandbox_id.ljust(16), s.backend.ljust(9), str(s.bytes)])


async def _snapshot(c: AsyncClient, a: argparse.Namespace) -> int:
    s = await (await c.attach(a.id)).snapshot(a.name)
    print(s.id if not s.name else f"{s.id} {s.name}")
    return 0


async def _snapshots(c: AsyncClient, a: argparse.Namespace) -> int:
    print("  ".join(["ID".ljust(22), "NAME".ljust(24), "SANDBOX".ljust(16), "BACKEND".ljust(9), "BYTES"]))
    for s in await c.snapshots(sandbox_id=a.sandbox):
        print(_snapshot_row(s))
    return 0


async def _snapshot_rm(c: AsyncClient, a: argparse.Namespace) -> int:
    for target in a.ids:
        print(await c.delete_snapshot(target))
    return 0


async def _fork(c: AsyncClient, a: argparse.Namespace) -> int:
    result = await (await c.attach(a.id)).fork(a.count)
    code = 0
    for item in result.outcomes:
        if item.ok and item.sandbox is not None:
            print(item.sandbox.id)
        else:
            print(f"{item.error.code if item.error else 'WARREN_ERR_INTERNAL'}: {item.error.message if item.error else ''}", file=sys.stderr)
            code = 1
    return code


async def _pause(c: AsyncClient, a: argparse.Namespace) -> int:
    for sid in a.ids:
        print(f"{sid} {(await (await c.attach(sid)).pause()).state}")
    return 0


async def _resume(c: AsyncClient, a: argparse.Namespace) -> int:
    for sid in a.ids:
        # attach brings a hibernated sandbox back itself; resume thaws a paused one.
        print(f"{sid} {(await (await c.attach(sid)).resume()).state}")
    return 0


async def _hibernate(c: AsyncClient, a: argparse.Namespace) -> int:
    for sid in a.ids:
        print(f"{sid} {(await (await c.attach(sid)).hibernate()).state}")
    return 0


async def _log(c: AsyncClient, a: argparse.Namespace) -> int:
    if a.json:
        # The wire form, page by page: the same lines as the Node CLI's `warren log --json`.
        seq = 0
        while True:
            page: Any = await c.request({"type": "trajectory", "id": a.id, "fromSeq": seq}, retry=True)
            if seq == 0 and page.get("header") is not None:
                print(json_line(page["header"]))
            for step in page.get("steps") or []:
                print(json_line(step))
            nxt = int(page.get("nextSeq") or seq)
            if not page.get("steps") or nxt <= seq:
                return 0
            seq = nxt
    first = await c.trajectory(a.id)
    if first.header is not None:
        sys.stdout.write(header_line(first.header))
    async for step in c.steps(a.id):
        sys.stdout.write(step_lines(step))
    return 0


def add_parsers(sub: Any) -> None:
    """Adds the parsers of these commands to ``sub`` (the handlers are ``COMMANDS``)."""
    snap = sub.add_parser("snapshot", help="cut a snapshot of a sandbox's files; prints its id")
    snap.add_argument("id")
    snap.add_argument("--name", metavar="NAME:TAG")
    snaps = sub.add_parser("snapshots", help="list your snapshots, newest first")
    snaps.add_argument("--sandbox", metavar="ID")
    rm = sub.add_parser("snapshot-rm", help="delete snapshots (by id or name:tag)")
    rm.add_argument("ids", nargs="+")
    fork = sub.add_parser("fork", help="snapshot a sandbox and make N sandboxes from it; prints their ids")
    fork.add_argument("id")
    fork.add_argument("-n", "--count", type=int, default=1)
    for name, text in (("pause", "freeze sandboxes"), ("resume", "thaw paused sandboxes, or bring hibernated ones back"),
                       ("hibernate", "snapshot sandboxes and end them on their node, keeping their records")):
        sub.add_parser(name, help=text).add_argument("ids", nargs="+")
    log = sub.add_parser("log", help="print a sandbox's trajectory")
    log.add_argument("id")
    log.add_argument("--json", action="store_true", help="JSON lines: the header, then a step a line")


#: The handlers, by command name.
COMMANDS: dict[str, Command] = {"snapshot": _snapshot, "snapshots": _snapshots, "snapshot-rm": _snapshot_rm, "fork": _fork,
                                "pause": _pause, "resume": _resume, "hibernate": _hibernate, "log": _log}
