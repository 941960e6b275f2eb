"""Best-of-N from a shared start: set a task up once, fork the sandbox, try one answer per fork.

One container sandbox receives the task and runs the agent's first commands (the common prefix
of every attempt). ``sb.fork(N)`` snapshots it and makes N sandboxes from the snapshot in one
request: each starts with the task's files exactly as they were, and what one fork writes no
other sees. Each fork tries its own answer and is scored by the task's tests. Then every
sandbox is killed, and the winner's trajectory is read back from the cluster (it outlives the
sandbox): each command with its exit code and a hash of its output, as recorded.

    WARREN_URL=ws://… WARREN_TOKEN=wrn_… python3 examples/python/fork.py [N]
"""
from __future__ import annotations

import asyncio
import sys
import uuid

import warren

N = int(sys.argv[1]) if len(sys.argv) > 1 else 4

TASK_TESTS = b"""#!/bin/sh
cd /task || exit 2
[ "$(sh solution.sh 20 22)" = 42 ] && [ "$(sh solution.sh -5 5)" = 0 ]
"""
# One candidate per fork (a model's samples, in a trainer): only some are right.
CANDIDATES = ["echo $(($1 - $2))", "echo $(($1 + $2))", "echo $1$2", "expr $1 + $2", "echo 42"]


async def attempt(fork: warren.Sandbox, answer: str) -> tuple[warren.Sandbox, bool]:
    await fork.files.write("/task/solution.sh", answer + "\n")
    scored = await fork.exec("/task/test.sh", timeout_ms=30_000)
    return fork, scored.exit_code == 0


async def main() -> None:
    run = uuid.uuid4().hex[:12]
    async with await warren.AsyncClient.connect() as client:
        base = await client.create(backend="container", ttl_ms=10 * 60_000, labels={"run": run})
        try:
            # The shared prefix: the task's files and the agent's first look around.
            await base.files.mkdir("/task", parents=True)
            await base.files.write("/task/test.sh", TASK_TESTS, mode=0o755)
            await base.exec("ls -l /task && cat /task/test.sh")
            forked = await base.fork(N, labels={"role": "attempt"})
            for o in forked.outcomes:
                if not o.ok:
                    print(f"a fork was not made: {o.error}", file=sys.stderr)
            print(f"snapshot {forked.snapshot.id}: {len(forked.snapshot.layers)} layers, "
                  f"{forked.snapshot.bytes} bytes; {len(forked.sandboxes)} forks")
            results = await asyncio.gather(*(attempt(f, CANDIDATES[i % len(CANDIDATES)])
                                             for i, f in enumerate(forked.sandboxes)))
        finally:
            await client.kill(labels={"run": run})  # the base and every fork (they carry its labels)
        winners = [f for f, ok in results if ok]
        print(f"run {run}: {len(winners)}/{len(results)} forks passed")
        if winners:
            # The node ships a sandbox's last steps as it ends: the trajectory is whole once complete.
            for _ in range(100):
                page = await client.trajectory(winners[0].id, limit=1)
                if page.complete:
                    break
                await asyncio.sleep(0.1)
            made_from = page.header.snapshot if page.header is not None else None
            print(f"trajectory of {winners[0].id} (made from {made_from}):")
            async for step in client.steps(winners[0].id):
                if isinstance(step, warren.ExecStep):
                    out = step.stdout.sha256[:12] if step.stdout is not None else "-"
                    print(f"  {step.seq:>3} exec {' '.join(step.argv)!r} -> exit {step.exit_code}, stdout sha256 {out}")
                else:
                    print(f"  {step.seq:>3} {step.kind}")
        await client.delete_snapshot(forked.snapshot.id)


if __name__ == "__main__":
    asyncio.run(main())
