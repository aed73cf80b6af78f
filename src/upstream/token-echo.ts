import { Transform, type TransformCallback } from 'node:stream'
import type { Secret } from '../sessions/secret.ts'

/**
 * Finding a session's messaging token in what its runtime sends back. A working runtime never echoes the
 * token; one that does is broken (an error message quoting its request, a debug header) and must not hand it
 * to a browser. The runtime holds the token anyway, so this is about echoes, not a runtime set on leaking it
 * in some encoding: it finds the token as it is, JSON-escaped, and (in headers) any 8-character piece of it.
 */

/** Length of the token pieces looked for in a header value: an echo of part of the token is still a leak. */
const PIECE = 8
/** Tokens shorter than this are not masked in bodies: every short string would match somewhere by chance. */
const MIN_MASKED = 8
/** What replaces every byte of an echo in a body: the length stays the same, so Content-Length stays true. */
const MASK_BYTE = 0x2a // '*'

/** Where an echo was found: the `where` label of `krg_upstream_token_echoes_total`. */
export type EchoPlace = 'header' | 'body' | 'event'

/**
 * The ways one token can appear: as it is, JSON-escaped (`"` and `\`), with `/` escaped as well. Printable
 * ASCII (tokens are), so a string's length is its byte length.
 */
function spellings(token: string): string[] {
  const json = token.replace(/["\\]/g, (c) => `\\${c}`)
  return [...new Set([token, json, json.replaceAll('/', '\\/')])]
}

/** Multiplier of the rolling hash over {@link PIECE}-character windows (32-bit, wrapping). */
const HASH_BASE = 31

/** The rolling hash of `text.slice(from, from + n)`, the way {@link TokenEcho.inHeader} rolls it. */
function windowHash(text: string, from: number, n: number): number {
  let h = 0
  for (let i = from; i < from + n; i++) h = (Math.imul(h, HASH_BASE) + text.charCodeAt(i)) | 0
  return h
}

/** One token's echo finder; get it with {@link tokenEcho} (built once per token). */
export class TokenEcho {
  readonly #pieces: ReadonlySet<string>
  /** Rolling hashes of {@link #pieces}: a header is scanned without a substring per position. */
  readonly #pieceHashes: ReadonlySet<number>
  /** HASH_BASE ** (pieceLength - 1), what the character leaving the window weighs. */
  readonly #leaving: number
  readonly #pieceLength: number
  readonly #spellings: readonly string[]
  readonly #patterns: readonly Buffer[]
  readonly #longest: number

  constructor(token: string) {
    this.#pieceLength = Math.min(PIECE, token.length)
    const pieces = new Set<string>()
    for (let i = 0; i + this.#pieceLength <= token.length; i++)
      pieces.add(token.slice(i, i + this.#pieceLength))
    this.#pieces = pieces
    this.#pieceHashes = new Set([...pieces].map((p) => windowHash(p, 0, p.length)))
    let leaving = 1
    for (let i = 1; i < this.#pieceLength; i++) leaving = Math.imul(leaving, HASH_BASE)
    this.#leaving = leaving
    this.#spellings = token.length >= MIN_MASKED ? spellings(token) : []
    this.#patterns = this.#spellings.map((s) => Buffer.from(s, 'latin1'))
    this.#longest = Math.max(0, ...this.#patterns.map((p) => p.length))
  }

  /** Whether a header value holds the token or any {@link PIECE}-character piece of it. */
  inHeader(value: string): boolean {
    const n = this.#pieceLength
    if (n === 0 || value.length < n) return false
    // Every header of every answer is scanned: a hash per window, a substring only where a hash matches.
    let h = windowHash(value, 0, n)
    for (let i = 0; ; i++) {
      if (this.#pieceHashes.has(h) && this.#pieces.has(value.slice(i, i + n))) return true
      if (i + n >= value.length) return false
      const out = Math.imul(value.charCodeAt(i), this.#leaving)
      h = (Math.imul(h - out, HASH_BASE) + value.charCodeAt(i + n)) | 0
    }
  }

  /** `text` with every echo masked, and how many there were. */
  maskText(text: string): { text: string; echoes: number } {
    let echoes = 0
    let out = text
    for (const s of this.#spellings) {
      if (!out.includes(s)) continue
      const parts = out.split(s)
      echoes += parts.length - 1
      out = parts.join('*'.repeat(s.length))
    }
    return { text: out, echoes }
  }

  /**
   * A pass-through stream that masks every echo in the bytes, however the chunks split it: the last bytes of
   * a chunk that could begin an echo are held until the next one. `onEcho` is called once per echo.
   */
  masker(onEcho: () => void): Transform {
    return new BodyMask(this.#patterns, this.#longest, onEcho)
  }

  /** A whole body with every echo masked: `body` itself when there is none, else a masked copy. */
  maskBody(body: Buffer, onEcho: () => void): Buffer {
    return maskEchoes(body, false, this.#patterns, onEcho)
  }
}

/**
 * `buf` with every spelling in `patterns` overwritten by {@link MASK_BYTE}, `onEcho` called once per echo. A
 * buffer the caller was handed (`owned` false) is never written into: it is copied once, on the first echo.
 */
function maskEchoes(buf: Buffer, owned: boolean, patterns: readonly Buffer[], onEcho: () => void): Buffer {
  let out = buf
  let copied = owned
  for (const pattern of patterns) {
    for (let at = out.indexOf(pattern); at !== -1; at = out.indexOf(pattern, at + pattern.length)) {
      if (!copied) {
        out = Buffer.from(out)
        copied = true
      }
      out.fill(MASK_BYTE, at, at + pattern.length)
      onEcho()
    }
  }
  return out
}

class BodyMask extends Transform {
  readonly #patterns: readonly Buffer[]
  /** Bytes held back at most: one less than the longest spelling. */
  readonly #hold: number
  readonly #onEcho: () => void
  #tail: Buffer | null = null

  constructor(patterns: readonly Buffer[], longest: number, onEcho: () => void) {
    super()
    this.#patterns = patterns
    this.#hold = Math.max(0, longest - 1)
    this.#onEcho = onEcho
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (this.#patterns.length === 0) {
      callback(null, chunk)
      return
    }
    // A chunk the stream was handed is never written into; a concatenation with the tail is ours.
    const joined = this.#tail !== null
    const buf = maskEchoes(
      joined ? Buffer.concat([this.#tail as Buffer, chunk]) : chunk,
      joined,
      this.#patterns,
      this.#onEcho,
    )
    const keep = Math.min(this.#hold, buf.length)
    this.#tail = keep === 0 ? null : buf.subarray(buf.length - keep)
    callback(null, buf.subarray(0, buf.length - keep))
  }

  override _flush(callback: TransformCallback): void {
    callback(null, this.#tail)
  }
}

const built = new WeakMap<Secret, TokenEcho>()

/**
 * The echo finder of a session's token, built once per token and forgotten with it (its pieces are a set of a
 * few thousand strings at most).
 */
export function tokenEcho(token: Secret): TokenEcho {
  let echo = built.get(token)
  if (echo === undefined) {
    echo = new TokenEcho(token.reveal())
    built.set(token, echo)
  }
  return echo
}
