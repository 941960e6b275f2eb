/**
 * The page: a login, then the dashboard — nodes, creation charts and layer caches (an admin
 * key's), the key's sandboxes, and the trajectory of the one clicked. Everything is read over
 * one WebSocket; notices about the tenant's sandboxes refresh the list at once, and the rest is
 * asked again every second.
 */
import { html } from 'htm/preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { Connection, WarrenError } from './client.js'
import { CreationCharts } from './charts.js'
import { usePoll } from './hooks.js'
import { Login } from './login.js'
import { Layers, Nodes } from './nodes.js'
import { Sandboxes } from './sandboxes.js'
import { Trajectory } from './trajectory.js'
import type { ClusterStats } from './types.js'

/**
 * Where the key is kept: this tab's sessionStorage. Never a URL (it would reach logs and
 * history) and no cookie: a cookie goes with every request, so a WebSocket another site opens
 * to this port would be logged in with it; the page sends the key itself, in the `auth` frame.
 */
const KEY = 'warren.key'
const WINDOW_SEC = 600

export const DashboardDefaults = {
  /** Tenants an admin's picker lists. */
  maxTenants: 1000
}

function Dashboard (props: { conn: Connection, onLogout: () => void, lost: string | undefined }) {
  const [selected, setSelected] = useState<string | undefined>(undefined)
  const [kick, setKick] = useState(0)
  useEffect(() => {
    let pending = 0
    props.conn.onNotice = () => {
      // A burst of notices is one refresh.
      if (pending === 0) pending = window.setTimeout(() => { pending = 0; setKick((k) => k + 1) }, 100)
    }
    return () => { window.clearTimeout(pending); props.conn.onNotice = () => {} }
  }, [props.conn])

  const stats = usePoll(() => props.conn.request<ClusterStats>({ type: 'cluster-stats', windowSec: WINDOW_SEC }), 1000, [props.conn])
  const forbidden = stats.error?.code === 'WARREN_ERR_FORBIDDEN'
  // An admin picks whose sandboxes to see (bounded: the first DashboardDefaults.maxTenants tenants).
  const [tenant, setTenant] = useState('')
  const admin = stats.value !== undefined
  const tenants = usePoll(async () => admin
    ? (await props.conn.request<Array<{ tenant: string }>>({ type: 'tenant-list' })).slice(0, DashboardDefaults.maxTenants).map((t) => t.tenant)
    : undefined, 10_000, [props.conn, admin])
  const pickTenant = (t: string): void => { setTenant(t); setSelected(undefined) }
  return html`
    <header class="top">
      <span class="logo">warren</span>
      <span class=${`live ${props.lost === undefined ? 'on' : 'off'}`} id="live">${props.lost === undefined ? 'live' : `disconnected: ${props.lost}`}</span>
      <span class="spacer"></span>
      <button class="ghost" id="logout" onClick=${props.onLogout}>Log out</button>
    </header>
    <main class="grid">
      ${forbidden
        ? html`<section class="card wide" id="cluster-forbidden"><p class="muted">Nodes, creation charts and layer caches need an admin key; this key shows its tenant's sandboxes.</p></section>`
        : html`
          <section class="card wide"><div class="card-head"><h2>Nodes</h2></div>
            ${stats.error !== undefined ? html`<p class="error small">${stats.error.message}</p>` : null}
            <${Nodes} stats=${stats.value} /></section>
          <section class="card span2"><div class="card-head"><h2>Creations</h2></div><${CreationCharts} points=${stats.value?.creations} windowSec=${WINDOW_SEC} /></section>
          <section class="card"><div class="card-head"><h2>Cluster and layer cache</h2></div><${Layers} stats=${stats.value} /></section>`}
      <section class="card wide"><div class="card-head"><h2>Sandboxes</h2></div>
        <${Sandboxes} conn=${props.conn} kick=${kick} selected=${selected} onSelect=${setSelected} tenants=${tenants.value} tenant=${tenant} onTenant=${pickTenant} /></section>
      ${selected !== undefined ? html`<div class="wide"><${Trajectory} key=${`${tenant}/${selected}`} conn=${props.conn} id=${selected} tenant=${tenant} onClose=${() => setSelected(undefined)} /></div>` : null}
    </main>`
}

export function App () {
  const [conn, setConn] = useState<Connection | undefined>(undefined)
  const [error, setError] = useState<string | undefined>(undefined)
  const [lost, setLost] = useState<string | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const retry = useRef(0)

  const login = async (key: string, remembered = false): Promise<void> => {
    setBusy(true)
    setError(undefined)
    try {
      const c = await Connection.open(key)
      sessionStorage.setItem(KEY, key)
      setLost(undefined)
      c.onClose = (why) => {
        setLost(why.message)
        // Reconnect with the same key after a pause (the control plane restarted, the network blinked).
        window.clearTimeout(retry.current)
        retry.current = window.setTimeout(() => { const k = sessionStorage.getItem(KEY); if (k !== null) void login(k, true) }, 2000)
      }
      setConn(c)
    } catch (err) {
      const refused = err instanceof WarrenError && err.code === 'WARREN_ERR_UNAUTHENTICATED'
      if (refused) { sessionStorage.removeItem(KEY); setConn(undefined) }
      if (remembered && !refused) {
        setLost(err instanceof Error ? err.message : String(err))
        retry.current = window.setTimeout(() => { const k = sessionStorage.getItem(KEY); if (k !== null) void login(k, true) }, 2000)
      } else {
        setError(refused ? 'That key was refused: it is not a live API key of this control plane.' : err instanceof Error ? err.message : String(err))
      }
    } finally {
      setBusy(false)
    }
  }

  useEffect(() => {
    const k = sessionStorage.getItem(KEY)
    if (k !== null) void login(k, true)
    return () => window.clearTimeout(retry.current)
  }, [])

  const logout = (): void => {
    window.clearTimeout(retry.current)
    sessionStorage.removeItem(KEY)
    if (conn !== undefined) { conn.onClose = () => {}; conn.close() }
    setConn(undefined)
    setLost(undefined)
  }

  if (conn === undefined) return html`<${Login} onLogin=${(k: string) => { void login(k) }} error=${error} busy=${busy} />`
  return html`<${Dashboard} conn=${conn} onLogout=${logout} lost=${lost} />`
}
