import type { IncomingHttpHeaders } from 'node:http'
import { create as formatDisposition, parse as parseDisposition } from 'content-disposition'
import type { TokenEcho } from './token-echo.ts'

/**
 * What of a runtime's answer reaches a browser, on the gateway's origin where operators' cookies live. A
 * runtime lives in a desktop that browses the untrusted web, so its answers are hostile input: the gateway
 * decides every header a browser acts on (type, disposition, sandbox, caching), whatever the runtime sent,
 * and lets through only the few descriptive headers each kind of route needs (an allowlist, not a denylist:
 * `Location`, `Refresh`, `Set-Cookie`, `Link`, `Clear-Site-Data`, `Service-Worker-Allowed`, CORS, `Alt-Svc`
 * and whatever comes next never pass).
 */

/** How a v1 route's answers are shaped: JSON APIs, run files (`artifacts/*`), uploaded files (`attachments/<id>`). */
export type AnswerKind = 'json' | 'artifact' | 'attachment'

/** What the gateway knows about the request an answer belongs to. */
export interface AnswerRequest {
  readonly kind: AnswerKind
  /** `artifact`: the file's name (its last path segment, already validated); `attachment`: its id. */
  readonly fileName?: string
  /** `attachment`: the client asked for `?inline=1`. */
  readonly inline?: boolean
}

/**
 * The Content-Security-Policy of every v1 answer: a document served from here, if a browser renders one,
 * runs no script, loads nothing and is its own opaque origin (no cookies, no same-origin reads).
 */
export const SANDBOX_CSP = "sandbox; default-src 'none'"

const TEXT = 'text/plain; charset=utf-8'
const JSON_TYPE = 'application/json; charset=utf-8'
const DOWNLOAD = 'application/octet-stream'

/** The spec's artifact types by extension: images, JSON and plain text; anything else is a download. */
const ARTIFACT_TYPES: Readonly<Record<string, string>> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  json: 'application/json',
  jsonl: TEXT,
  md: TEXT,
  txt: TEXT,
  tail: TEXT,
  log: TEXT,
}

/** The only attachment types shown inline, and only when asked (`?inline=1`), as the spec says. */
const INLINE_IMAGES: ReadonlySet<string> = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp'])

/** Longest immutable lifetime passed on (a year, what the runtime gives screenshots). */
const MAX_AGE_S = 31_536_000

/** Descriptive headers of any answer, passed on when well-formed and holding no token echo. */
const JSON_HEADERS: Readonly<Record<string, RegExp>> = {
  'content-length': /^\d{1,15}$/,
  etag: /^(W\/)?"[\x21\x23-\x7e]{0,200}"$/,
  'last-modified': /^[A-Za-z0-9 ,:]{1,64}$/,
  'retry-after': /^[A-Za-z0-9 ,:]{1,64}$/,
}
/** Files add what ranges need. */
const FILE_HEADERS: Readonly<Record<string, RegExp>> = {
  ...JSON_HEADERS,
  'accept-ranges': /^(bytes|none)$/,
  'content-range': /^bytes (\d{1,15}-\d{1,15}|\*)\/(\d{1,15}|\*)$/,
}
const PASSED: Readonly<Record<AnswerKind, Readonly<Record<string, RegExp>>>> = {
  json: JSON_HEADERS,
  artifact: FILE_HEADERS,
  attachment: FILE_HEADERS,
}
/** {@link PASSED} as lists, made once rather than per answer. */
const PASSED_LIST: Readonly<Record<AnswerKind, readonly (readonly [string, RegExp])[]>> = {
  json: Object.entries(JSON_HEADERS),
  artifact: Object.entries(FILE_HEADERS),
  attachment: Object.entries(FILE_HEADERS),
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? (value.length === 1 ? value[0] : undefined) : value
}

/** The media type without parameters, lower case; undefined when not `type/subtype`. */
function parseEssence(contentType: string): string | undefined {
  const value = contentType.split(';', 1)[0]?.trim().toLowerCase()
  return value !== undefined &&
    /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/.test(value)
    ? value
    : undefined
}

/** Content-Type values seen in answers and their essence: a runtime sends a handful, over and over. */
const essences = new Map<string, string | undefined>()
/** Past this many distinct values (a runtime making them up) the map starts over. */
const ESSENCES_MAX = 256

/** {@link parseEssence}, once per distinct header value; undefined when absent. */
function essence(contentType: string | undefined): string | undefined {
  if (contentType === undefined) return undefined
  if (essences.has(contentType)) return essences.get(contentType)
  const value = parseEssence(contentType)
  if (essences.size >= ESSENCES_MAX) essences.clear()
  essences.set(contentType, value)
  return value
}

function isJson(type: string | undefined): boolean {
  return type === 'application/json' || (type?.startsWith('application/') === true && type.endsWith('+json'))
}

function extensionOf(name: string): string {
  const dot = name.lastIndexOf('.')
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : ''
}

/** Control characters and path separators: never part of a file name offered for download. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const UNSAFE_NAME_CHARS = /[\u0000-\u001f\u007f-\u009f/\\]/g

/** A file name fit for a Content-Disposition: no control characters or separators, bounded, no token. */
function safeName(name: string | undefined, echo: TokenEcho): string | undefined {
  if (name === undefined) return undefined
  const cleaned = name.replace(UNSAFE_NAME_CHARS, '_').trim().slice(0, 200)
  return cleaned.length === 0 || echo.inHeader(cleaned) ? undefined : cleaned
}

/** The name of an uploaded file as its runtime gave it, if it can be read. */
function uploadedName(header: string | undefined): string | undefined {
  if (header === undefined) return undefined
  try {
    return parseDisposition(header).parameters.filename
  } catch {
    return undefined
  }
}

/**
 * Cache-Control for a file: private always (the answer is one operator's authorised read, never for a shared
 * cache), a lifetime only when the runtime gave one (screenshots are immutable), otherwise no-store.
 */
function fileCaching(upstream: string | undefined): string {
  const directives = new Map<string, string>()
  for (const part of (upstream ?? '').toLowerCase().split(',')) {
    const [name, value = ''] = part.trim().split('=', 2)
    if (name) directives.set(name, value)
  }
  const maxAge = Number(directives.get('max-age'))
  if (directives.has('no-store') || !Number.isSafeInteger(maxAge) || maxAge <= 0) return 'no-store'
  return `private, max-age=${Math.min(maxAge, MAX_AGE_S)}${directives.has('immutable') ? ', immutable' : ''}`
}

/** The headers of a successful file answer: type and disposition by the gateway's rules. */
function fileHeaders(
  request: AnswerRequest,
  upstream: IncomingHttpHeaders,
  echo: TokenEcho,
): Record<string, string> {
  const name = request.fileName
  if (request.kind === 'artifact') {
    const type = ARTIFACT_TYPES[extensionOf(name ?? '')]
    if (type !== undefined) return { 'content-type': type }
    const filename = safeName(name, echo) ?? 'artifact'
    return { 'content-type': DOWNLOAD, 'content-disposition': formatDisposition(filename) }
  }
  const uploaded = essence(single(upstream['content-type']))
  const filename =
    safeName(uploadedName(single(upstream['content-disposition'])), echo) ?? safeName(name, echo)
  const image = uploaded !== undefined && INLINE_IMAGES.has(uploaded)
  const inline = image && request.inline === true
  return {
    // Downloads keep the uploaded type (the spec's rule) unless it is not a plain `type/subtype`; with
    // `attachment`, nosniff and the sandbox, no type can make a browser run it on this origin.
    'content-type': uploaded ?? DOWNLOAD,
    'content-disposition': formatDisposition(filename ?? 'attachment', {
      type: inline ? 'inline' : 'attachment',
    }),
  }
}

/**
 * The headers a client gets with a runtime's answer (one that passes through at all: see failures.ts).
 * `onEcho` is called for every header left out because it held the token or a piece of it.
 */
export function answerHeaders(
  request: AnswerRequest,
  status: number,
  upstream: IncomingHttpHeaders,
  echo: TokenEcho,
  onEcho: () => void,
): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [name, pattern] of PASSED_LIST[request.kind]) {
    const value = single(upstream[name])
    if (value === undefined || !pattern.test(value)) continue
    if (echo.inHeader(value)) {
      onEcho()
      continue
    }
    out[name] = value
  }
  const passed = PASSED[request.kind]
  for (const name in upstream) {
    // Every other header is dropped anyway; these are counted, since only a broken runtime sends them.
    const value = upstream[name]
    if (name in passed || value === undefined) continue
    if (Array.isArray(value) ? value.some((v) => echo.inHeader(v)) : echo.inHeader(value)) onEcho()
  }
  const type = essence(single(upstream['content-type']))
  const file = request.kind !== 'json' && (status === 200 || status === 206 || status === 304)
  if (file) {
    Object.assign(out, fileHeaders(request, upstream, echo))
    out['cache-control'] = fileCaching(single(upstream['cache-control']))
  } else {
    // A JSON API answer, or a runtime's refusal of a file request: JSON stays JSON, anything else is text.
    if (status !== 204 && status !== 304) out['content-type'] = isJson(type) ? JSON_TYPE : TEXT
    out['cache-control'] = 'no-store'
  }
  out['x-content-type-options'] = 'nosniff'
  out['content-security-policy'] = SANDBOX_CSP
  return out
}
