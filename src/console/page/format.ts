import { h } from './dom.ts'

/** Times as people read them, with the server's clock (the overview says what time it is there). */

let skewMs = 0

/** The server's time (from the overview's `ready` event) against this browser's clock. */
export function setServerNow(iso: string): void {
  const server = Date.parse(iso)
  if (!Number.isNaN(server)) skewMs = server - Date.now()
}

/** Now, on the server's clock. */
export function now(): number {
  return Date.now() + skewMs
}

/** `4:05` or `1:02:03` left until `iso`; `0:00` once it has passed. */
export function timeLeft(iso: string): string {
  const ms = Math.max(0, Date.parse(iso) - now())
  const s = Math.floor(ms / 1000)
  const hh = Math.floor(s / 3600)
  const mm = Math.floor((s % 3600) / 60)
  const ss = String(s % 60).padStart(2, '0')
  return hh > 0 ? `${hh}:${String(mm).padStart(2, '0')}:${ss}` : `${mm}:${ss}`
}

/** `just now`, `5 min ago`, `3 h ago`, or the date. */
export function ago(iso: string | null): string {
  if (iso === null) return 'no activity yet'
  const s = Math.round((now() - Date.parse(iso)) / 1000)
  if (s < 45) return 'just now'
  if (s < 3600) return `${Math.round(s / 60)} min ago`
  if (s < 86_400) return `${Math.round(s / 3600)} h ago`
  return new Date(iso).toLocaleDateString()
}

/** The one way the console writes a time of day: the person's locale and time zone, to the second. */
const CLOCK = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' })

/** A clock time in the person's locale and time zone. */
export function clock(iso: string): string {
  const ms = Date.parse(iso)
  return Number.isNaN(ms) ? iso : CLOCK.format(ms)
}

/**
 * A `<time>` showing `iso` as {@link clock} writes it, the instant itself in its `datetime` and (for a
 * pointer's precision) its title; null when `iso` is not a time.
 */
export function timeOf(iso: string, className?: string): HTMLTimeElement | null {
  const ms = Date.parse(iso)
  if (Number.isNaN(ms)) return null
  return h('time', { datetime: iso, title: iso, class: className }, CLOCK.format(ms))
}

/** An ISO 8601 date-time with its zone (a time without one is no instant: it stays text). */
const ISO_INSTANT = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})/g

/**
 * Text with every ISO 8601 instant in it (a deadline in a step's result, say) written as {@link timeOf}
 * writes it, so a line never mixes the runtime's UTC with the person's own clock.
 */
export function withTimes(text: string): (Node | string)[] {
  const out: (Node | string)[] = []
  let from = 0
  for (const m of text.matchAll(ISO_INSTANT)) {
    const time = timeOf(m[0])
    if (time === null) continue
    if (m.index > from) out.push(text.slice(from, m.index))
    out.push(time)
    from = m.index + m[0].length
  }
  if (from < text.length) out.push(text.slice(from))
  return out
}

/** `1.2 MB`, `340 KB`, `12 B`. */
export function bytes(n: number): string {
  if (n >= 1024 * 1024) return `${(n / 1024 / 1024).toFixed(1)} MB`
  if (n >= 1024) return `${Math.round(n / 1024)} KB`
  return `${n} B`
}
