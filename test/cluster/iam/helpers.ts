import { IamStore } from '../../../src/cluster/iam/index.js'
import { openState } from '../../../src/state/index.js'

/** An IamStore on a fresh state (in memory, or in `dataDir`) whose clock the test moves; closed by `defer`. */
export function clockStore (defer: (fn: () => unknown) => void, dataDir?: string): { store: IamStore, clock: { now: number } } {
  const state = openState(dataDir)
  defer(() => state.close())
  const clock = { now: 1_700_000_000_000 }
  return { store: new IamStore(state.db, () => clock.now), clock }
}
