"""A Gymnasium-style environment over a warren sandbox, as agent harnesses expect one.

`reset()` creates a fresh sandbox (and ends the last one), `step(action)` runs the action as a
shell command and returns (observation, reward, terminated, truncated, info), `close()` kills
the sandbox. The reward here: 1.0 once /workspace/answer holds the expected text. Gymnasium is
optional: when it is installed the class is a `gymnasium.Env`.

    WARREN_URL=ws://… WARREN_TOKEN=wrn_… python3 examples/python/gym_env.py
"""
from __future__ import annotations

from typing import Any

import warren

try:  # optional: the environment works the same without it
    import gymnasium
    _Base: Any = gymnasium.Env
except ImportError:
    _Base = object

GOAL = "hello from the sandbox"


class ShellEnv(_Base):  # type: ignore[misc]
    """One episode per sandbox; the observation is the command's output (stdout, then stderr)."""

    def __init__(self, client: warren.Client | None = None, max_steps: int = 16, **spec: Any) -> None:
        self._own_client = client is None
        self.client = client or warren.Client.connect()
        self.spec = {"backend": "container", "ttl_ms": 10 * 60_000, **spec}
        self.max_steps = max_steps
        self.sandbox: warren.SyncSandbox | None = None
        self.steps = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Ends the last episode's sandbox and starts a new one with the task in /workspace."""
        self._end_episode()
        self.sandbox = self.client.create(**self.spec)
        self.sandbox.files.mkdir("/workspace", parents=True)
        self.sandbox.files.write("/workspace/TASK", f"Write '{GOAL}' into /workspace/answer.\n".encode())
        self.steps = 0
        return self.sandbox.files.read("/workspace/TASK").decode(), {"sandbox": self.sandbox.id}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Runs `action` in the sandbox; done when the answer is right, truncated at max_steps."""
        if self.sandbox is None:
            raise RuntimeError("call reset() first")
        self.steps += 1
        r = self.sandbox.exec(action, cwd="/workspace", timeout_ms=30_000)
        check = self.sandbox.exec("cat /workspace/answer 2>/dev/null")
        solved = check.stdout.strip() == GOAL
        info = {"exit_code": r.exit_code, "duration_ms": r.duration_ms, "reason": r.reason}
        return r.stdout + r.stderr, 1.0 if solved else 0.0, solved, self.steps >= self.max_steps and not solved, info

    def close(self) -> None:
        """Kills the sandbox (and closes the client if this environment made it)."""
        self._end_episode()
        if self._own_client:
            self.client.close()

    def _end_episode(self) -> None:
        if self.sandbox is not None:
            self.sandbox.kill()
            self.sandbox = None


if __name__ == "__main__":
    env = ShellEnv()
    try:
        obs, info = env.reset()
        print("task:", obs.strip(), info)
        for action in ["ls", "cat TASK", f"echo '{GOAL}' > answer"]:
            obs, reward, terminated, truncated, info = env.step(action)
            print(f"$ {action}\n{obs}reward={reward} terminated={terminated} truncated={truncated}")
            if terminated or truncated:
                break
    finally:
        env.close()
