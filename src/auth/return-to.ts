const PROBE = 'http://gateway.invalid'
const MAX_LENGTH = 2048

/**
 * Where a sign-in may send the person afterwards: a path on this same origin, or `fallback` (the console).
 * Anything that a browser could read as another origin is refused: protocol-relative `//evil`, `/\evil`
 * (browsers read `\` as `/`), control characters (browsers strip tab, CR and LF, so `/\t/evil` becomes
 * `//evil`), absolute URLs and `javascript:`, and anything over 2 KiB. What is returned is re-serialised by
 * the URL parser (percent-encoded, dot segments resolved), so it is safe in a Location header as it stands.
 */
export function safeReturnTo(value: unknown, fallback: string): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_LENGTH) return fallback
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
  if (!value.startsWith('/') || value.startsWith('//') || /[\\\u0000-\u001f\u007f]/.test(value))
    return fallback
  let url: URL
  try {
    url = new URL(value, PROBE)
  } catch {
    return fallback
  }
  const path = `${url.pathname}${url.search}${url.hash}`
  // `/..//evil` and the like only show their `//` once dot segments are resolved.
  if (url.origin !== PROBE || path.startsWith('//')) return fallback
  return path
}
