"""A batch of coding-task rollouts on warren, the way an RL trainer's rollout worker runs them.

Each rollout gets its own container sandbox (all made by one create_many), receives its task's
files, runs the "agent's" commands (here a scripted policy that sometimes writes a wrong
answer, standing in for a model), is scored by running the task's tests, and hands back its
trajectory (every command and its outcome, as the cluster recorded it). At most CONCURRENCY
rollouts run at once; a progress line counts them.

    WARREN_URL=ws://… WARREN_TOKEN=wrn_… python3 examples/python/rollout.py [N] [CONCURRENCY]
"""
from __future__ import annotations

import asyncio
import random
import sys
import time
import uuid
from dataclasses import dataclass

import warren

N = int(sys.argv[1]) if len(sys.argv) > 1 else 64
CONCURRENCY = int(sys.argv[2]) if len(sys.argv) > 2 else 16

# The task: make `solution.sh A B` print A+B. Its tests are the reward.
TASK_README = b"Write solution.sh: given two integers, print their sum.\n"
TASK_TESTS = b"""#!/bin/sh
cd /task || exit 2
pass=0
for case in "1 2 3" "20 22 42" "-5 5 0" "100 -1 99"; do
  set -- $case
  got=$(sh solution.sh "$1" "$2")
  [ "$got" = "$3" ] && pass=$((pass + 1))
done
echo "$pass/4"
[ "$pass" = 4 ]
"""


@dataclass
class Rollout:
    index: int
    sandbox_id: str
    reward: float
    score: str
    steps: int


def policy(rng: random.Random) -> list[str]:
    """The agent's commands: look around, then write an answer (right about two times in three)."""
    answer = 'echo $(($1 + $2))' if rng.random() < 0.67 else 'echo $(($1 - $2))'
    return ["ls /task", "cat /task/README", f"printf '%s\\n' '{answer}' > /task/solution.sh"]


async def rollout(index: int, sb: warren.Sandbox, gate: asyncio.Semaphore, progress: "Progress") -> Rollout:
    async with gate:
        rng = random.Random(index)
        await sb.files.mkdir("/task", parents=True)
        await sb.files.write("/task/README", TASK_README)
        await sb.files.write("/task/test.sh", TASK_TESTS, mode=0o755)
        for command in policy(rng):
            await sb.exec(command, timeout_ms=10_000)
        scored = await sb.exec("/task/test.sh", timeout_ms=30_000)
        trajectory = await sb.trajectory()
        progress.done(scored.exit_code == 0)
        return Rollout(index, sb.id, 1.0 if scored.exit_code == 0 else 0.0, scored.stdout.strip(), len(trajectory.steps))


class Progress:
    def __init__(self, total: int) -> None:
        self.total, self.finished, self.solved, self.started = total, 0, 0, time.monotonic()

    def done(self, solved: bool) -> None:
        self.finished += 1
        self.solved += solved
        rate = self.finished / max(time.monotonic() - self.started, 1e-9)
        end = "\n" if self.finished == self.total else ""
        print(f"\rrollouts {self.finished}/{self.total}  solved {self.solved}  {rate:.1f}/s", end=end, file=sys.stderr, flush=True)


async def main() -> None:
    batch = uuid.uuid4().hex[:12]
    async with await warren.AsyncClient.connect() as client:
        # One request for the whole batch; the label finds them all again (and kills them).
        sandboxes = await client.create_many(N, backend="container", ttl_ms=10 * 60_000, labels={"batch": batch})
        try:
            gate = asyncio.Semaphore(CONCURRENCY)
            progress = Progress(N)
            results = await asyncio.gather(*(rollout(i, sb, gate, progress) for i, sb in enumerate(sandboxes)))
        finally:
            await client.kill(labels={"batch": batch})
    mean = sum(r.reward for r in results) / len(results)
    print(f"batch {batch}: {len(results)} rollouts, mean reward {mean:.2f}, "
          f"{sum(r.steps for r in results)} trajectory steps")


if __name__ == "__main__":
    asyncio.run(main())
