/**
 * Names the control plane keeps state under (tenants, image names). Words that are keys of
 * every JavaScript object (`__proto__`, `constructor`, `toString`…) are refused everywhere, so
 * no name can ever collide with an object's own machinery on its way through the system.
 */
import { createError, ErrorCodes } from '../errors.js'

const RESERVED = new Set([...Object.getOwnPropertyNames(Object.prototype), 'prototype'].map((w) => w.toLowerCase()))

/** True for `__proto__`, `constructor`, `prototype` and the other keys every object has (any case). */
export function isReservedWord (word: string): boolean {
  return RESERVED.has(word.toLowerCase())
}

/**
 * Checks a name against its grammar and the reserved words.
 * @param rule the grammar in words, for the error message
 * @throws WARREN_ERR_INVALID_ARGUMENT with `details.field`
 */
export function checkName (value: unknown, field: string, pattern: RegExp, rule: string): string {
  if (typeof value !== 'string' || !pattern.test(value)) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `${field} must be ${rule}, not ${JSON.stringify(typeof value === 'string' ? value.slice(0, 80) : value) ?? String(value)}`, { field })
  }
  if (isReservedWord(value)) throw createError(ErrorCodes.INVALID_ARGUMENT, `${field} ${value} is a reserved word`, { field })
  return value
}
