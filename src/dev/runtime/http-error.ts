/**
 * An error the simulated runtime answers with: `{error, message, ...extra}` at `statusCode`.
 * (The gateway's own errors live in src/errors.ts; this is the upstream's wire format, not the gateway's.)
 */
export class HttpError extends Error {
  readonly statusCode: number
  readonly code: string
  readonly extra: Record<string, unknown>

  constructor(statusCode: number, code: string, message: string, extra: Record<string, unknown> = {}) {
    super(message)
    this.name = 'HttpError'
    this.statusCode = statusCode
    this.code = code
    this.extra = extra
  }

  /** The JSON body the runtime sends for this error. */
  body(): Record<string, unknown> {
    return { error: this.code, message: this.message, ...this.extra }
  }
}
