/**
 * Where the SDK and CLI find the control plane: explicit options, then WARREN_URL,
 * WARREN_TOKEN and WARREN_CA, then ~/.warren/config.json (written by `warren up`, mode 0600).
 * The CA (for a `wss://` control plane whose certificate the system does not trust) is a PEM
 * file's path, or PEM text.
 */
import { mkdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { createError, ErrorCodes } from '../errors.js'

export interface WarrenConfig {
  url: string
  token: string
  /** The control plane's CA: a PEM file's path or PEM text (only where its certificate is the operator's own). */
  ca?: string
}

/** The config file's path; WARREN_CONFIG overrides it (tests use their own). */
export function configPath (): string {
  return process.env.WARREN_CONFIG ?? join(homedir(), '.warren', 'config.json')
}

function readConfigFile (): Partial<WarrenConfig> {
  try {
    const parsed = JSON.parse(readFileSync(configPath(), 'utf8')) as Partial<WarrenConfig>
    return parsed !== null && typeof parsed === 'object' ? parsed : {}
  } catch {
    return {}
  }
}

/**
 * Resolves the URL and token.
 * @throws WARREN_ERR_INVALID_ARGUMENT when neither is found anywhere
 */
export function resolveConfig (options: Partial<WarrenConfig> = {}): WarrenConfig {
  const file = (options.url === undefined || options.token === undefined) ? readConfigFile() : {}
  const url = options.url ?? process.env.WARREN_URL ?? file.url
  const token = options.token ?? process.env.WARREN_TOKEN ?? file.token
  // The file's CA belongs to the file's URL: one given another way does not inherit it.
  const envCa = process.env.WARREN_CA !== '' ? process.env.WARREN_CA : undefined
  const ca = options.ca ?? envCa ?? (url === file.url ? file.ca : undefined)
  if (url === undefined || token === undefined) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `no control plane configured: pass { url, token }, set WARREN_URL and WARREN_TOKEN, or run \`warren up\` (it writes ${configPath()})`)
  }
  return { url, token, ...(ca !== undefined && ca !== '' ? { ca } : {}) }
}

/** Writes the config file with mode 0600: it holds an admin token. */
export function writeConfig (config: WarrenConfig): string {
  const path = configPath()
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  writeFileSync(path, JSON.stringify(config, null, 2) + '\n', { mode: 0o600 })
  chmodSync(path, 0o600)
  return path
}
