/** Hooks the panels share: polling a request over the connection, one at a time. */
import { useEffect, useRef, useState } from 'preact/hooks'
import { WarrenError } from './client.js'

export interface Polled<T> { value: T | undefined, error: WarrenError | undefined }

/**
 * Runs `load` now and again `everyMs` after each answer (never two at once), while the
 * component is shown and `deps` stay the same; `kick` changes force a run at once.
 */
export function usePoll<T> (load: () => Promise<T>, everyMs: number, deps: unknown[], kick = 0): Polled<T> {
  const [state, setState] = useState<Polled<T>>({ value: undefined, error: undefined })
  const timer = useRef(0)
  const busy = useRef(false)
  const again = useRef(false)
  const loadRef = useRef(load)
  loadRef.current = load
  const run = useRef<() => void>(() => {})

  useEffect(() => {
    let live = true
    run.current = () => {
      if (!live) return
      if (busy.current) { again.current = true; return }
      busy.current = true
      window.clearTimeout(timer.current)
      loadRef.current().then(
        (value) => { if (live) setState({ value, error: undefined }) },
        (err: unknown) => { if (live) setState((s) => ({ value: s.value, error: err instanceof WarrenError ? err : new WarrenError('WARREN_ERR_INTERNAL', String(err)) })) }
      ).finally(() => {
        busy.current = false
        if (!live) return
        if (again.current) { again.current = false; run.current() } else timer.current = window.setTimeout(() => run.current(), everyMs)
      })
    }
    setState({ value: undefined, error: undefined })
    run.current()
    return () => { live = false; window.clearTimeout(timer.current) }
  }, deps)

  useEffect(() => { if (kick > 0) run.current() }, [kick])
  return state
}
