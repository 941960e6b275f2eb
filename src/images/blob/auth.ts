/** Bearer-token checks for the blob server: the node join token in `Authorization: Bearer <token>`. */
import { createHash, timingSafeEqual } from 'node:crypto'

/** Decides whether a presented token may read the store. A throw counts as "no". */
export type TokenCheck = (token: string) => boolean | Promise<boolean>

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken (header: string | undefined): string | undefined {
  if (header === undefined) return undefined
  const m = /^Bearer[ ]+([\x21-\x7e]+)[ ]*$/i.exec(header)
  return m === null ? undefined : m[1]
}

/**
 * A check accepting exactly `expected`, in constant time. Both sides are hashed first so the
 * comparison neither leaks the length nor throws on unequal lengths.
 */
export function tokenCheck (expected: string): TokenCheck {
  const want = createHash('sha256').update(expected).digest()
  return (token) => timingSafeEqual(createHash('sha256').update(token).digest(), want)
}
