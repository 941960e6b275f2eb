/**
 * Exit codes the function backend reserves, following shell conventions so a trainer reading
 * results from several backends sees the same numbers. A function may return any 0–255 itself.
 */
export const ExitCodes = {
  /** The function finished and reported success. */
  OK: 0,
  /** The function threw, rejected, or left an unhandled promise rejection. */
  FAILED: 1,
  /** The call was cut by its time limit (as `timeout(1)` reports). */
  TIMEOUT: 124,
  /** The function's module could not be loaded or has no default export function (shell: "cannot execute"). */
  CANNOT_EXECUTE: 126,
  /** The worker running the call died (process.exit, uncaught exception), like a process killed by SIGABRT. */
  CRASHED: 134,
  /** The call was killed, or its worker ran out of memory: as a process killed by SIGKILL. */
  KILLED: 137
} as const
