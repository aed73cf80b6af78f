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
  const mode = single(request.headers['sec-fetch-mode'])
  const dest = single(request.headers['sec-fetch-dest'])
  if (mode !== undefined || dest !== undefined) return mode === 'navigate' || dest === 'document'
  const accept = single(request.headers.accept)
  if (accept === undefined) return false
  return new Negotiator({ headers: { accept } }).mediaType(['application/json', 'text/html']) === 'text/html'
}

function single(value: string | string[] | undefined): string | undefined {
  const v = Array.isArray(value) ? value[0] : value
  return v === undefined ? undefined : v.trim().toLowerCase()
}
