/**
 * Errors across `client.worker()`'s thread boundary. comlink rebuilds a thrown Error from its
 * message, name and stack only, so a WarrenError's `code` and `details` were lost on the way
 * and a trainer could not tell a QUOTA from a NO_CAPACITY. Both threads install this handler:
 * a WarrenError crosses in its wire form and is a WarrenError again on the other side.
 */
import * as Comlink from 'comlink'
import { fromWireError, isWarrenError, toWireError, type WireError } from '../errors.js'

/** What crosses for a thrown value: our wire form, or comlink's own. */
type Thrown = { warren: WireError, stack?: string } | { warren?: undefined }

let installed = false

/** Installs the handler in this thread (once; later calls do nothing). */
export function keepErrorCodes (): void {
  if (installed) return
  installed = true
  // comlink's handler for thrown values: its `canHandle` knows comlink's private marker.
  const original = Comlink.transferHandlers.get('throw') as Comlink.TransferHandler<{ value: unknown }, Thrown>
  const handler: Comlink.TransferHandler<{ value: unknown }, Thrown> = {
    canHandle: (value): value is { value: unknown } => original.canHandle(value),
    serialize: (thrown) => {
      if (!isWarrenError(thrown.value)) return original.serialize(thrown)
      return [{ warren: toWireError(thrown.value), ...(thrown.value.stack !== undefined ? { stack: thrown.value.stack } : {}) }, []]
    },
    deserialize: (serialized) => {
      if (serialized.warren === undefined) return original.deserialize(serialized)
      const err = fromWireError(serialized.warren)
      if (serialized.stack !== undefined) err.stack = serialized.stack
      throw err
    }
  }
  Comlink.transferHandlers.set('throw', handler as Comlink.TransferHandler<unknown, unknown>)
}
