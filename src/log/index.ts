/**
 * The servers' structured log (pino): one JSON object a line on stderr by default, pretty lines
 * (pino-pretty) only when stderr is a terminal, so a collector never has to parse colours and a
 * person at a terminal never has to read JSON. The ids that matter travel as fields of their own
 * — `tenant`, `sandbox`, `node`, `exec`, `shard`, `keyId` — bound once with `logger.child(...)`.
 *
 * The CLI prints to its user; the servers (`warren up`, `warren node`) and the library log. A
 * library caller that passes no logger gets a silent one unless `WARREN_LOG_LEVEL` says
 * otherwise, so an embedded cluster (tests, a trainer's own process) writes nothing it did not ask for.
 */
import { createRequire } from 'node:module'
import { hostname } from 'node:os'
import type { DestinationStream, Logger } from 'pino'
import { createError, ErrorCodes } from '../errors.js'

export type { Logger } from 'pino'

const require = createRequire(import.meta.url)
let loaded: typeof import('pino').pino | undefined
/** pino, loaded at the first logger made: a CLI command that only talks to a cluster never loads it. */
function pinoOf (): typeof import('pino').pino {
  loaded ??= (require('pino') as typeof import('pino')).pino
  return loaded
}

/** The levels an operator may choose; `silent` logs nothing. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'silent'] as const
export type LogLevel = typeof LOG_LEVELS[number]

export const LogDefaults = {
  /** The servers' level when neither `--log-level` nor the environment names one. */
  level: 'info' as LogLevel,
  /** A library caller's level when it passes no logger (an embedded cluster stays quiet). */
  libraryLevel: 'silent' as LogLevel,
  /** The environment variable naming the level (`--log-level` wins over it). */
  envVar: 'WARREN_LOG_LEVEL'
}

export interface LoggerOptions {
  level?: LogLevel
  /**
   * Where the lines go (tests capture them with a stream of their own). Default stderr: JSON,
   * or pretty when stderr is a terminal.
   */
  destination?: DestinationStream
  /** Force pretty (true) or JSON (false); default: pretty only when writing to a terminal's stderr. */
  pretty?: boolean
  /** Fields every line carries (e.g. `{ node: 'node-a' }`). */
  bindings?: Record<string, unknown>
}

/** True when `v` names a level. */
export function isLogLevel (v: unknown): v is LogLevel {
  return typeof v === 'string' && (LOG_LEVELS as readonly string[]).includes(v)
}

/**
 * A level as an operator wrote it.
 * @param v the flag's or the variable's value
 * @param field what to name in the refusal (`log-level` for the flag, the variable's name otherwise)
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `field` for anything but a known level
 */
export function parseLogLevel (v: unknown, field = 'log-level'): LogLevel {
  if (!isLogLevel(v)) throw createError(ErrorCodes.INVALID_ARGUMENT, `${field} must be one of ${LOG_LEVELS.join(', ')}, not ${JSON.stringify(String(v).slice(0, 40))}`, { field })
  return v
}

/**
 * The level to run at: the flag's, else the environment's, else `fallback`.
 * @throws WARREN_ERR_INVALID_ARGUMENT naming the flag or the variable when it holds no level
 */
export function resolveLogLevel (flag: string | undefined, fallback: LogLevel = LogDefaults.level, env: NodeJS.ProcessEnv = process.env): LogLevel {
  if (flag !== undefined) return parseLogLevel(flag, 'log-level')
  const fromEnv = env[LogDefaults.envVar]
  if (fromEnv !== undefined && fromEnv !== '') return parseLogLevel(fromEnv, LogDefaults.envVar)
  return fallback
}

/**
 * Makes a logger.
 * @param options level, destination, pretty or not, fields bound to every line
 * @returns a pino logger; `logger.child({ sandbox })` binds more ids
 */
export function createLogger (options: LoggerOptions = {}): Logger {
  const pino = pinoOf()
  const level = options.level ?? LogDefaults.level
  const pretty = options.pretty ?? prettyByDefault(options.destination, process.stderr.isTTY === true)
  const opts = {
    level,
    // ISO times: readable at a terminal and in a grep, still ordered as text.
    timestamp: pino.stdTimeFunctions.isoTime,
    base: { pid: process.pid, hostname: hostname(), ...options.bindings },
    formatters: { level: (label: string) => ({ level: label }) }
  }
  if (pretty) return pino(opts, prettyStream(options.destination))
  return pino(opts, options.destination ?? pino.destination({ dest: 2, sync: true }))
}

/**
 * Whether lines are pretty when the caller does not say: only when they go to stderr (no
 * destination of the caller's) and stderr is a terminal. A pipe, a file, journald get JSON.
 */
export function prettyByDefault (destination: DestinationStream | undefined, stderrIsTTY: boolean): boolean {
  return destination === undefined && stderrIsTTY
}

/** The logger of a library caller that gave none: silent unless `WARREN_LOG_LEVEL` names a level. */
export function defaultLogger (): Logger {
  const fromEnv = process.env[LogDefaults.envVar]
  return createLogger({ level: isLogLevel(fromEnv) ? fromEnv : LogDefaults.libraryLevel })
}

let silent: Logger | undefined

/** A logger that writes nothing (one for the process), for parts whose caller gave none. */
export function silentLogger (): Logger {
  silent ??= pinoOf()({ level: 'silent' })
  return silent
}

/**
 * pino-pretty as a stream (not a worker-thread transport: lines come out in order with
 * everything else the process writes), loaded only when wanted, so a JSON-logging server never
 * loads it.
 */
function prettyStream (destination: DestinationStream | undefined): DestinationStream {
  const pretty = require('pino-pretty') as (o: Record<string, unknown>) => DestinationStream
  return pretty({
    colorize: destination === undefined,
    sync: true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
    ...(destination !== undefined ? { destination } : { destination: 2 })
  })
}

export { errorField } from './error-field.js'
export { watchSystem, idsOfAddress, DeadLetterLogDefaults, type SystemWatch } from './system-events.js'
export { createLogWindows, type LogWindows, type LogWindowSinks } from './log-window.js'
