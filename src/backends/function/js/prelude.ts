/**
 * Source of the script that furnishes each `js` sandbox before the untrusted code runs. It is
 * evaluated inside the sandbox's own context, so every object it makes (console, args, env) is
 * made of the sandbox's intrinsics: walking `.constructor` from any of them reaches only the
 * sandbox's Function, whose string compilation is disabled. The one host value it receives, the
 * `write` bridge, stays inside its closure and is only ever handed primitives.
 *
 * The script evaluates to `install(write, argsJson, envJson, stdinText)`, which returns `hold(v)`:
 * the host keeps a thrown value there and then evaluates `DESCRIBE_SOURCE` under the sandbox's
 * time limit to turn it into text, so user getters and toString never run outside that limit.
 */

/** The global the prelude leaves for `DESCRIBE_SOURCE` (non-enumerable; tampering only spoils the caller's own error text). */
export const DESCRIBE_GLOBAL = '__warrenDescribe'

/** Evaluates, inside the sandbox, to the description (a string) of the value last held. */
export const DESCRIBE_SOURCE = `globalThis.${DESCRIBE_GLOBAL}()`

export const PRELUDE_SOURCE = `(function install (write, argsJson, envJson, stdinText) {
  'use strict'
  const g = globalThis
  const defineProperty = Object.defineProperty
  const freeze = Object.freeze
  const parse = JSON.parse
  const stringify = JSON.stringify
  const toText = String
  const ErrorClass = Error

  function text (value) {
    try {
      if (typeof value === 'string') return value
      if (value instanceof ErrorClass) {
        const stack = value.stack
        return typeof stack === 'string' ? stack : toText(value)
      }
      if (typeof value === 'object' && value !== null) {
        const json = stringify(value)
        if (typeof json === 'string') return json
      }
      return toText(value)
    } catch (_) {
      return '[value that cannot be printed]'
    }
  }

  function printer (fd) {
    return function print (...values) {
      let line = ''
      for (let i = 0; i < values.length; i++) line += (i === 0 ? '' : ' ') + text(values[i])
      write(fd, line + '\\n')
    }
  }

  function hidden (name, value) {
    defineProperty(g, name, { value, writable: true, configurable: true, enumerable: false })
  }

  // Shared memory and WebAssembly have no use here and widen what untrusted code can touch.
  delete g.WebAssembly
  delete g.SharedArrayBuffer
  delete g.Atomics
  // Its callbacks run whenever the garbage collector decides, outside every timed evaluation:
  // in a later call of the same process they could loop and cut someone else's call.
  delete g.FinalizationRegistry

  hidden('console', freeze({ log: printer(1), info: printer(1), debug: printer(1), warn: printer(2), error: printer(2) }))
  hidden('args', freeze(parse(argsJson)))
  hidden('env', freeze(parse(envJson)))
  hidden('stdin', stdinText)

  let held
  hidden(${JSON.stringify(DESCRIBE_GLOBAL)}, function describe () {
    const value = held
    held = undefined
    return text(value)
  })
  return function hold (value) { held = value }
})`
