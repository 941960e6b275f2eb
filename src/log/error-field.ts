/**
 * An error as a log line's field (`err`): pino's serializer writes its type, message, stack and
 * own fields (a WarrenError's `code` and `details`). Anything thrown that is not an Error becomes
 * one, so the line always says what it was.
 */
export function errorField (err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err))
}
