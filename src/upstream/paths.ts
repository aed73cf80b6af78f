import { KASM_ID } from '../sessions/types.ts'

/**
 * Path validation and upstream URL building. The upstream URL is always rebuilt from validated, re-encoded
 * segments relative to the session's base; the raw request path never reaches a runtime.
 */

/** Characters allowed in ids, run ids and idempotency keys inside a path. */
const PARAM = /^[A-Za-z0-9._:-]+$/

/** Longest message id, request id, attachment id or run id accepted in a path. */
export const MAX_ID_CHARS = 128
/** Longest idempotency key accepted in a path. */
export const MAX_KEY_CHARS = 256

/**
 * Whether `value` (a path parameter, already percent-decoded once by the router) is a safe id: letters,
 * digits, `.`, `_`, `:`, `-`, 1..`max` characters, and not a whole `.` or `..` (the only dot names a URL
 * parser removes; `..0a9`, `.x`, `x..` and `...` are names). A `%` left after the router's one decode (double
 * encoding) fails the character check, and so does `/`: an id is always one segment.
 */
export function isSafeParam(value: unknown, max = MAX_ID_CHARS): value is string {
  return (
    typeof value === 'string' &&
    value.length >= 1 &&
    value.length <= max &&
    PARAM.test(value) &&
    value !== '.' &&
    value !== '..'
  )
}

/**
 * Whether `value` (the router's one decode of the path parameter) can be an idempotency key in a path. The
 * spec lets a client pick any key, so any text of 1..`MAX_KEY_CHARS` characters passes (`ключ-1`, spaces,
 * `/`, `%`), encoded once on the way up, except what no URL path can carry as data: a `.` or `..` part
 * (URL parsers remove dot segments, `%2e` included, and a runtime that decodes `%2F` would see one).
 */
export function isKeyParam(value: unknown): value is string {
  if (typeof value !== 'string' || value.length < 1 || value.length > MAX_KEY_CHARS) return false
  return value.split('/').every((part) => part !== '.' && part !== '..')
}

/** Whether `value` is a valid kasm id (see {@link KASM_ID}). */
export function isKasmId(value: unknown): value is string {
  return typeof value === 'string' && KASM_ID.test(value)
}

/** Characters allowed in a decoded artifacts path segment; the first may not be a dot (no dotfiles). */
const ARTIFACT_SEGMENT = /^[A-Za-z0-9_~+@,=()-][A-Za-z0-9 ._~+@,=()-]*$/
/** Percent-encodings refused outright in an artifacts path: dot, slash, backslash, percent, semicolon, NUL. */
const ENCODED_TRICK = /%(2e|2f|5c|25|3b|00)/i
const MAX_ARTIFACT_PATH_CHARS = 1024
const MAX_ARTIFACT_SEGMENT_CHARS = 255
const MAX_ARTIFACT_SEGMENTS = 16

/**
 * Parses the raw (still percent-encoded) artifacts path after `artifacts/` into decoded segments, or
 * `undefined` for anything that is not a plain relative file path: empty, empty segments (`//`, a trailing
 * slash), `.` or `..` and every other dotfile (the runtime serves none), backslashes, `;`, encoded
 * dots/slashes/backslashes/percents, double encoding, malformed encoding, characters outside the safe set, or
 * too long. Dots inside a name (`report..json`, `x..`) are part of it.
 */
export function parseArtifactPath(raw: string): string[] | undefined {
  if (raw.length === 0 || raw.length > MAX_ARTIFACT_PATH_CHARS) return undefined
  if (raw.includes('\\') || raw.includes(';') || ENCODED_TRICK.test(raw)) return undefined
  const parts = raw.split('/')
  if (parts.length > MAX_ARTIFACT_SEGMENTS) return undefined
  const out: string[] = []
  for (const part of parts) {
    let decoded: string
    try {
      decoded = decodeURIComponent(part)
    } catch {
      return undefined
    }
    if (
      decoded.length === 0 ||
      decoded.length > MAX_ARTIFACT_SEGMENT_CHARS ||
      decoded.includes('%') ||
      decoded.endsWith(' ') ||
      !ARTIFACT_SEGMENT.test(decoded)
    ) {
      return undefined
    }
    out.push(decoded)
  }
  return out
}

/** The raw path of a request URL (no query string), exactly as the client sent it. */
export function rawPath(url: string): string {
  const q = url.indexOf('?')
  return q === -1 ? url : url.slice(0, q)
}

/** Names accepted in GATEWAY_EXTRA_READ_ROUTES: 1 to 4 segments of letters, digits, `_`, `-`. */
const EXTRA_ROUTE_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}(\/[A-Za-z0-9][A-Za-z0-9_-]{0,63}){0,3}$/

/** Whether `name` is a valid extra read-only route name (e.g. `report`, `v1/status`). */
export function isExtraRouteName(name: string): boolean {
  return EXTRA_ROUTE_NAME.test(name)
}

/** Joins segments into a relative path, each segment encoded with encodeURIComponent. */
export function joinSegments(segments: readonly string[]): string {
  return segments.map((s) => encodeURIComponent(s)).join('/')
}

/** Session bases parsed so far (one per runtime; a request parses only its own path). Never mutated. */
const bases = new Map<string, string>()
/** More bases than sessions a replica serves at once: past it the map starts over. */
const BASES_MAX = 4096

/** A session base as a normalised absolute URL ending in `/`. */
function parsedBase(base: string): string {
  let href = bases.get(base)
  if (href === undefined) {
    // A base without its trailing slash would resolve a relative path against its parent directory.
    href = new URL(base.endsWith('/') ? base : `${base}/`).href
    if (bases.size >= BASES_MAX) bases.clear()
    bases.set(base, href)
  }
  return href
}

/**
 * What {@link joinSegments} and the routes' fixed names produce: the characters encodeURIComponent leaves
 * as they are, `%` escapes and `/` between segments. Nothing a URL parser would re-encode, or read as a
 * scheme, query, fragment or another host.
 */
const ENCODED_PATH = /^[A-Za-z0-9_.!~*'()%-]+(\/[A-Za-z0-9_.!~*'()%-]+)*$/
/** A `.` or `..` segment, encoded or not: URL parsers remove them, `%2e` included. */
const DOT_SEGMENT = /(^|\/)(\.|%2e){1,2}(\/|$)/i

/**
 * The absolute upstream URL for a validated relative path (no leading slash) and an encoded query string
 * (without `?`, may be empty): the session's base with the path appended. A string, not a parsed URL: a
 * parse per request cost more than the rest of the path building. Throws for a path that could leave the
 * base once parsed, which validated paths never are: a last guard, not the check.
 */
export function upstreamUrl(base: string, relativePath: string, query: string): string {
  if (!ENCODED_PATH.test(relativePath) || DOT_SEGMENT.test(relativePath)) {
    throw new Error('upstream path must be a plain relative path')
  }
  const href = parsedBase(base) + relativePath
  return query === '' ? href : `${href}?${query}`
}

/** Where the path of an absolute URL made by {@link upstreamUrl} starts (the `/` after the authority). */
function pathStart(url: string): number {
  return url.indexOf('/', url.indexOf('//') + 2)
}

/**
 * Whether the path guard of @fastify/reply-from would refuse `url` (an {@link upstreamUrl}): it refuses every
 * URL that holds `/..` or `../` once decoded, which takes names such as `..0a9` or a key's `x../y` (its `/`
 * encoded) for traversal. Checked loosely (any `..`, any encoded dot) and with no decode. Such a URL is sent
 * by its exact request target through the router instead (`upstream/agent.ts`); {@link upstreamUrl}'s guard,
 * which refuses every real dot segment, has passed it by then.
 */
export function proxyRefuses(url: string): boolean {
  return url.includes('..') || url.includes('%2e') || url.includes('%2E')
}

/** The origin of an {@link upstreamUrl} with a `/` path: what reply-from is given for a {@link proxyRefuses} URL. */
export function upstreamOrigin(url: string): string {
  return url.slice(0, pathStart(url) + 1)
}

/** The request target of an {@link upstreamUrl} (its path) with an encoded query (without `?`, may be empty). */
export function requestTarget(url: string, query: string): string {
  const path = url.slice(pathStart(url))
  return query === '' ? path : `${path}?${query}`
}
