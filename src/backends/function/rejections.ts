/**
 * Unhandled promise rejections in a worker or child that runs one call at a time belong to
 * that call: they are collected for it. Between calls one belongs to no call, so the process
 * crashes as Node would, and its pool replaces it.
 */
let current: unknown[] | undefined

/** Installs the process-wide handler; call once at start-up. */
export function routeUnhandledRejections (): void {
  process.on('unhandledRejection', (reason) => {
    if (current !== undefined) {
      current.push(reason)
      return
    }
    throw reason
  })
}

/** Collects the rejections that happen while `work` runs (into the array it receives). */
export async function withCallRejections<T> (work: (rejections: unknown[]) => Promise<T>): Promise<T> {
  const rejections: unknown[] = []
  current = rejections
  try {
    return await work(rejections)
  } finally {
    current = undefined
  }
}
