import type { FastifyRequest } from 'fastify'
import Negotiator from 'negotiator'

/**
 * Whether a request is a browser navigation (a person opened or reloaded a page), which gets a human page,
 * rather than a `fetch`, `EventSource` or a program, which gets the JSON error body.
 *
 * Fetch metadata decides when the browser sent it (`Sec-Fetch-Mode: navigate` or `Sec-Fetch-Dest: document`):
 * a sidebar's `fetch` always carries `Sec-Fetch-Mode: cors` or `same-origin`, so it is never mistaken for a
 * navigation whatever it accepts. Without fetch metadata (an older browser, a proxy that strips it) an
 * `Accept` that prefers `text/html` to JSON counts; curl's and most clients' are treated as programs.
 */
export function isBrowserNavigation(request: FastifyRequest): boolean {
  const mode = headerToken(request, 'sec-fetch-mode')
  const dest = headerToken(request, 'sec-fetch-dest')
  if (mode !== undefined || dest !== undefined) return mode === 'navigate' || dest === 'document'
  const accept = headerToken(request, 'accept')
  if (accept === undefined) return false
  return new Negotiator({ headers: { accept } }).mediaType(['application/json', 'text/html']) === 'text/html'
}

/** A request header's (first) value, trimmed and lower-cased: how fetch metadata (`Sec-Fetch-*`) is compared. */
export function headerToken(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name]
  const v = Array.isArray(value) ? value[0] : value
  return v === undefined ? undefined : v.trim().toLowerCase()
}
