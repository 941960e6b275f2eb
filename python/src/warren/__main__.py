"""``python -m warren``: run, ps, exec, kill, create, and the snapshot, fork, pause, resume, hibernate and
log commands (cli_snapshots.py), like the Node CLI, for machines without Node.

Errors print as ``WARREN_ERR_*: message`` on stderr with exit code 1; ``run`` and ``exec`` exit
with the command's own code.
"""
from __future__ import annotations

import argparse
import asyncio
import re
import sys
from typing import Any, Sequence

from .cli_snapshots import COMMANDS as SNAPSHOT_COMMANDS, add_parsers
from .client import AsyncClient
from .errors import WarrenError, invalid

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def parse_ttl(text: str) -> int:
    """Milliseconds, or a number with ms, s, m or h."""
    m = re.fullmatch(r"(\d+)(ms|s|m|h)?", text.strip())
    if m is None:
        raise invalid("ttl", f"--ttl takes milliseconds or 30s, 10m, 2h, got {text}")
    return int(m.group(1)) * _UNITS[m.group(2) or "ms"]


def parse_labels(pairs: Sequence[str] | None) -> dict[str, str] | None:
    """``k=v`` pairs as a map; a pair without ``=`` or with an empty key is refused."""
    if not pairs:
        return None
    out: dict[str, str] = {}
    for p in pairs:
        k, eq, v = p.partition("=")
        if not eq or not k:
            raise invalid("label", f"--label takes key=value, got {p}")
        out[k] = v
    return out


def _spec(a: argparse.Namespace) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if a.backend:
        spec["backend"] = a.backend
    if a.image or a.workspace or a.tools:
        image: dict[str, Any] = {"base": a.image or "busybox"}
        if a.workspace:
            image["workspace"] = a.workspace
        if a.tools:
            image["tools"] = a.tools.split(",")
        spec["image"] = image
        spec.setdefault("backend", "container")
    if a.ttl:
        spec["ttl_ms"] = parse_ttl(a.ttl)
    labels = parse_labels(a.label)
    if labels:
        spec["labels"] = labels
    return spec


def _rest(argv: Sequence[str]) -> list[str]:
    rest = list(argv)
    if rest and rest[0] == "--":
        rest = rest[1:]
    if not rest:
        raise invalid("argv", "give a command after --")
    return rest


def _write(stream: Any, data: bytes) -> None:
    stream.buffer.write(data)
    stream.buffer.flush()


async def _run(c: AsyncClient, a: argparse.Namespace) -> int:
    sb = await c.create(**_spec(a))
    try:
        stdin = None if a.no_stdin or sys.stdin.isatty() else sys.stdin.buffer.read()
        r = await sb.exec(_rest(a.cmd), stdin=stdin, on_stdout=lambda b: _write(sys.stdout, b),
                          on_stderr=lambda b: _write(sys.stderr, b))
        return r.exit_code
    finally:
        await sb.kill()


async def _exec(c: AsyncClient, a: argparse.Namespace) -> int:
    sb = await c.attach(a.id)
    r = await sb.exec(_rest(a.cmd), on_stdout=lambda b: _write(sys.stdout, b), on_stderr=lambda b: _write(sys.stderr, b))
    return r.exit_code


async def _ps(c: AsyncClient, a: argparse.Namespace) -> int:
    views = await c.list(labels=parse_labels(a.label), state=a.state, all=a.all)
    print(f"{'ID':<18}{'STATE':<10}{'BACKEND':<11}LABELS")
    for v in views:
        labels = ",".join(f"{k}={val}" for k, val in sorted(v.labels.items()))
        print(f"{v.id:<18}{v.state:<10}{v.backend:<11}{labels}")
    return 0


async def _kill(c: AsyncClient, a: argparse.Namespace) -> int:
    code = 0
    for o in await c.kill(a.ids):
        if o.ok:
            print(f"{o.id} {'killed' if o.killed else 'already ' + str(o.state)}")
        else:
            print(f"{o.id} {o.error}", file=sys.stderr)
            code = 1
    return code


async def _create(c: AsyncClient, a: argparse.Namespace) -> int:
    print((await c.create(**_spec(a))).id)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m warren", description="warren sandboxes from Python")
    p.add_argument("--url", help="control plane (default WARREN_URL, then ~/.warren/config.json)")
    p.add_argument("--token", help="API key (default WARREN_TOKEN, then ~/.warren/config.json)")
    sub = p.add_subparsers(dest="command", required=True)

    def sandbox_flags(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--backend", choices=["function", "container", "microvm", "fullvm"])
        sp.add_argument("--image", metavar="N:T")
        sp.add_argument("--workspace", metavar="N:T")
        sp.add_argument("--tools", metavar="T1,T2")
        sp.add_argument("--ttl", metavar="DURATION")
        sp.add_argument("--label", action="append", metavar="K=V")

    run = sub.add_parser("run", help="create a sandbox, run CMD, exit with its code, kill it")
    sandbox_flags(run)
    run.add_argument("--no-stdin", action="store_true", help="give the command no stdin")
    run.add_argument("cmd", nargs=argparse.REMAINDER)
    create = sub.add_parser("create", help="create a sandbox and print its id")
    sandbox_flags(create)
    ps = sub.add_parser("ps", help="list your live sandboxes")
    ps.add_argument("--label", action="append", metavar="K=V")
    ps.add_argument("--state")
    ps.add_argument("--all", action="store_true")
    ex = sub.add_parser("exec", help="run a command in a sandbox")
    ex.add_argument("id")
    ex.add_argument("cmd", nargs=argparse.REMAINDER)
    kill = sub.add_parser("kill", help="end sandboxes")
    kill.add_argument("ids", nargs="+")
    add_parsers(sub)
    return p


_COMMANDS: dict[str, Any] = {"run": _run, "exec": _exec, "ps": _ps, "kill": _kill, "create": _create, **SNAPSHOT_COMMANDS}


async def _main(a: argparse.Namespace) -> int:
    async with await AsyncClient.connect(a.url, a.token) as c:
        return await _COMMANDS[a.command](c, a)


def main(argv: Sequence[str] | None = None) -> int:
    """The CLI's entry point; returns the exit code."""
    a = _parser().parse_args(argv)
    try:
        return asyncio.run(_main(a))
    except WarrenError as err:
        print(f"{err.code}: {err.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
