/** The login form: the user pastes an API key; nothing else is asked. */
import { html } from 'htm/preact'
import { useState } from 'preact/hooks'

export function Login (props: { onLogin: (key: string) => void, error: string | undefined, busy: boolean }) {
  const [key, setKey] = useState('')
  const submit = (e: Event): void => {
    e.preventDefault()
    if (key.trim() !== '') props.onLogin(key.trim())
  }
  return html`
    <main class="login">
      <form class="card login-card" onSubmit=${submit} autocomplete="off">
        <h1><span class="logo">warren</span> control plane</h1>
        <p class="muted">Log in with an API key: <code>warren up</code> prints the admin key; <code>warren token create</code> makes a tenant's.</p>
        <label for="key">API key</label>
        <input id="key" name="key" type="password" placeholder="wrn_…" value=${key} onInput=${(e: Event) => setKey((e.target as HTMLInputElement).value)} autofocus />
        <button id="login" type="submit" disabled=${props.busy}>${props.busy ? 'Logging in…' : 'Log in'}</button>
        ${props.error !== undefined ? html`<p id="login-error" class="error" role="alert">${props.error}</p>` : null}
        <p class="muted small">The key stays in this tab (sessionStorage) and goes only to this control plane, in the WebSocket login.</p>
      </form>
    </main>`
}
