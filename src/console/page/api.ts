/**
 * The console's calls to the gateway: its own routes under the base path, and the session routes at
 * `/desktop/<kasm_id>/mcp/`. The cookie signs every call in; the page never holds a token.
 */

/** The base path the console is served under (its script lives at `<base>assets/`). */
export const base: string = new URL('../', import.meta.url).pathname

/** The sidebar protocol base of a session, where the gateway serves the v1 routes. */
export function sessionBase(kasmId: string): string {
  return `/desktop/${encodeURIComponent(kasmId)}/mcp/`
}

/** A refusal, with the status and the body's stable error code when there is one. */
export class ApiError extends Error {
  readonly status: number
  readonly code: string
  readonly body: Record<string, unknown> | null

  constructor(status: number, body: Record<string, unknown> | null, fallback: string) {
    const message = typeof body?.message === 'string' ? body.message : fallback
    super(message)
    this.status = status
    this.code = typeof body?.error === 'string' ? body.error : `http_${status}`
    this.body = body
  }
}

let signedOut: (() => void) | null = null

/** What to do when the gateway says the person is not signed in (any 401). */
export function onSignedOut(handler: () => void): void {
  signedOut = handler
}

/** Tells the page the person is signed out (the event streams see their 401 this way too). */
export function reportSignedOut(): void {
  signedOut?.()
}

/** A JSON call; throws {@link ApiError} for any answer but 2xx (and reports a 401). */
export async function api<T = Record<string, unknown>>(path: string, init: RequestInit = {}): Promise<T> {
  let res: Response
  try {
    const headers = { ...Object.fromEntries(new Headers(init.headers)), 'x-krg-client': 'console' }
    res = await fetch(path, { credentials: 'same-origin', ...init, headers })
  } catch {
    throw new ApiError(0, null, 'the gateway cannot be reached; check your connection')
  }
  const type = res.headers.get('content-type') ?? ''
  const body = type.includes('json')
    ? ((await res.json().catch(() => null)) as Record<string, unknown> | null)
    : null
  if (res.status === 401) reportSignedOut()
  if (!res.ok) throw new ApiError(res.status, body, res.statusText || `HTTP ${res.status}`)
  return (body ?? {}) as T
}

/** POSTs a JSON body. */
export function post<T = Record<string, unknown>>(path: string, body: unknown, method = 'POST'): Promise<T> {
  return api<T>(path, { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
}

/** An idempotency key, made before the first attempt and kept for every retry. */
export function newKey(): string {
  return crypto.randomUUID()
}

/** Uploads one file to a session's `attachments` (multipart, one part named "file"). */
export function upload<T>(sessionPath: string, file: File): Promise<T> {
  const form = new FormData()
  form.append('file', file, file.name)
  return api<T>(`${sessionPath}attachments`, { method: 'POST', body: form })
}

/**
 * Who answered a question of `run` through the gateway, and when (its audit log, which keeps earlier runs
 * too); null when it has no record of an answer or cannot say.
 */
export function whoAnswered(
  kasmId: string,
  run: string,
  requestId: string,
): Promise<{ name: string; at: string } | null> {
  return api<{ name: string; at: string }>(
    `${base}api/sessions/${encodeURIComponent(kasmId)}/requests/${encodeURIComponent(requestId)}/answer?run=${encodeURIComponent(run)}`,
  ).catch(() => null)
}
