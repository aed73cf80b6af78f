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

/** A clock time in the person's locale. */
export function clock(iso: string): string {
  const d = new Date(iso)
  return Number.isNaN(d.getTime())
    ? iso
    : d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' })
}

/** `1.2 MB`, `340 KB`, `12 B`. */
export function bytes(n: number): string {
  if (n >= 1024 * 1024) return `${(n / 1024 / 1024).toFixed(1)} MB`
  if (n >= 1024) return `${Math.round(n / 1024)} KB`
  return `${n} B`
}
