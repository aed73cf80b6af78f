import { createParser, type EventSourceMessage } from 'eventsource-parser'
import { api, base, reportSignedOut } from './api.ts'

/** What an event stream reports to its owner. */
export interface StreamHandlers {
  /** The stream answered 200. */
  open?(): void
  event(message: EventSourceMessage): void
  comment?(text: string): void
  /**
   * The stream failed or ended; `status` is the HTTP status (0 for a network failure or a dropped stream),
   * `code` the gateway's error code. Return false to stop reconnecting.
   */
  trouble?(status: number, code: string | null, live: boolean): boolean | undefined
}

/** An open stream; `close` stops it for good. */
export interface EventStream {
  close(): void
  /** Reconnects now (a new run appeared, the tab came back). */
  reconnect(): void
}

/** The protocol's advice for a sidebar: poll every 1.5 s until live, back off 1-2-4..10 s after a drop. */
const POLL_MS = 1500
const BACKOFF_MS = [1000, 2000, 4000, 8000, 10_000]

/** A check of the person's sign-in is in flight (streams ending together ask once). */
let checking = false

/** Asks the gateway who the person is; a 401 is reported (the page leaves). */
function checkSignedIn(): void {
  if (checking) return
  checking = true
  api(`${base}auth/me`)
    .catch(() => null)
    .finally(() => {
      checking = false
    })
}

/**
 * Reads a server-sent-event stream with fetch and a stream reader (eventsource-parser does the parsing), so
 * a 502 from a proxy is told from a dropped stream and `Last-Event-ID` can be sent on a reconnect. A 401
 * reports the person signed out; a 403 or 404 stops.
 */
export function openEventStream(
  url: string,
  handlers: StreamHandlers,
  lastEventId?: () => string | null,
): EventStream {
  let abort: AbortController | null = null
  let timer: number | null = null
  let closed = false
  let failures = 0
  let everLive = false
  /** A reconnect was asked while connected: connect again at once once the stream has ended. */
  let now = false

  const schedule = (ms: number): void => {
    if (closed) return
    timer = window.setTimeout(() => {
      timer = null
      void connect()
    }, ms)
  }

  const connect = async (): Promise<void> => {
    if (closed) return
    abort = new AbortController()
    const headers: Record<string, string> = { accept: 'text/event-stream' }
    const id = lastEventId?.()
    if (id) headers['last-event-id'] = id
    let live = false
    let status = 0
    let code: string | null = null
    try {
      const res = await fetch(url, {
        headers,
        credentials: 'same-origin',
        signal: abort.signal,
        cache: 'no-store',
      })
      status = res.status
      if (res.status !== 200 || res.body === null) {
        const body = (await res.json().catch(() => null)) as { error?: unknown } | null
        code = typeof body?.error === 'string' ? body.error : null
      } else {
        live = true
        everLive = true
        handlers.open?.()
        const parser = createParser({
          onEvent: (e) => handlers.event(e),
          onComment: (c) => handlers.comment?.(c),
        })
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader()
        for (;;) {
          const { value, done } = await reader.read()
          if (done) break
          if (value.length > 0) failures = 0
          parser.feed(value)
        }
        status = 0
      }
    } catch {
      status = 0
    }
    abort = null
    if (closed) return
    if (now) {
      now = false
      void connect()
      return
    }
    if (status === 401) {
      reportSignedOut()
      return
    }
    // A live stream the gateway ended may mean a sign-out (in another tab, a revocation): ask at once, so the
    // page leaves within a moment rather than after the reconnect's backoff.
    if (live) checkSignedIn()
    const again = handlers.trouble?.(status, code, live)
    if (again === false || status === 403 || status === 404) return
    if (!everLive) {
      schedule(POLL_MS)
      return
    }
    schedule(BACKOFF_MS[Math.min(failures, BACKOFF_MS.length - 1)] ?? POLL_MS)
    failures++
  }

  void connect()
  return {
    close() {
      closed = true
      if (timer !== null) window.clearTimeout(timer)
      abort?.abort()
    },
    reconnect() {
      if (closed) return
      if (timer !== null) window.clearTimeout(timer)
      timer = null
      failures = 0
      if (abort !== null) {
        now = true
        abort.abort()
      } else void connect()
    },
  }
}
