/**
 * Tunable defaults of the container pieces (launcher, agent client, layers), in one place.
 * Protocol limits that the agent enforces are not tunable here: see `AgentLimits` in protocol.ts.
 */
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

// This file compiles to dist/src/backends/container/; setup builds the agent into dist/agent/.
const distDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..')

export const ContainerDefaults = {
  /** The `warren-init` binary (built by scripts/setup.mjs); WARREN_AGENT_PATH overrides it. */
  agentPath: process.env.WARREN_AGENT_PATH ?? join(distDir, 'agent', 'warren-init'),
  /** Where each sandbox gets `<id>/agent.sock` and `<id>/upper` on the host. */
  runDir: '/run/warren/sandboxes',
  /** Size of a sandbox's writable layer (a tmpfs inside the sandbox); 0 means unlimited, on the host disk. */
  diskMiB: 1024,
  /** A launch that is not ready by then is killed (its half-built sandbox dies with the launcher). */
  launchTimeoutMs: 10_000,
  /** How long destroy waits for the sandbox's processes to end and its cgroups to empty. */
  destroyTimeoutMs: 10_000,
  /** Connecting to an agent's socket. */
  connectTimeoutMs: 5_000,
  /** Every request but exec (which has its own timeout in the agent). */
  requestTimeoutMs: 30_000,
  /** Streamed stdin is cut into frames of at most this many bytes. */
  stdinChunkBytes: 256 * 1024,
  /**
   * The most a snapshot's tree may hold, in apparent bytes (EROFS stores a sparse file's holes
   * as zeros, so a small upper could otherwise ask for an image of any size).
   */
  snapshotMaxBytes: 16 * 1024 ** 3
} as const
