import { ApiError } from './api.ts'
import { bytes } from './format.ts'

/** An error's message, whatever was thrown. */
export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

/** A size against its limit, in the same unit: rounded, unless rounding would make them look equal. */
function sizes(size: number, limit: number): [string, string] {
  const [s, l] = [bytes(size), bytes(limit)]
  return s === l ? [`${size.toLocaleString()} bytes`, `${limit.toLocaleString()}-byte`] : [s, l]
}

/**
 * Why a message or an answer was not sent, as "Not sent: …". Over a limit it says both the limit and the
 * size of what was sent: the gateway's body limit (its 413 `limit`, bytes, against the JSON body this page
 * posted) or the run's limit on a message's text (the runtime's 413 `message_too_long`, characters).
 */
export function notSentText(
  err: unknown,
  what: 'message' | 'answer',
  sent: { readonly body: unknown; readonly text?: string },
): string {
  const limit = err instanceof ApiError && err.status === 413 ? err.body?.limit : undefined
  if (typeof limit === 'number' && err instanceof ApiError) {
    if (err.code === 'payload_too_large') {
      const [size, max] = sizes(new TextEncoder().encode(JSON.stringify(sent.body)).length, limit)
      return `Not sent: the ${what} is ${size}, over the ${max} limit. Shorten it and send it again.`
    }
    if (err.code === 'message_too_long' && sent.text !== undefined)
      return `Not sent: the ${what} is ${[...sent.text].length} characters, over the run’s limit of ${limit}. Shorten it and send it again.`
  }
  return `Not sent: ${errorText(err)}`
}
