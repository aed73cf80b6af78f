import type { IncomingMessage } from 'node:http'
import { finished, Transform, type TransformCallback } from 'node:stream'
import type { FastifyError, FastifyInstance } from 'fastify'
import { PayloadTooLarge } from '../errors.ts'

/**
 * Request bodies on the v1 write routes. JSON is kept as the exact bytes received (forwarded untouched, so
 * fields this gateway does not know pass through) and also parsed, to read `action` and `key`. Multipart
 * uploads are never parsed or buffered whole: the raw request stream goes upstream through a byte counter.
 */

/** A JSON request body: the bytes as received and their parse. */
export interface JsonBody {
  readonly raw: Buffer
  /** The client's Content-Type header, forwarded as sent (charset included). */
  readonly contentType: string
  /** The parsed top-level object; read, never re-serialised. Empty when {@link JsonBody.invalid}. */
  readonly value: Readonly<Record<string, unknown>>
  /**
   * Why the bytes are not a JSON object, if they are not. The route refuses it with 400, after its own
   * checks: a session-token-only route answers 403 whatever its body.
   */
  readonly invalid?: string
}

/**
 * Room for the multipart framing around the one file part (boundaries, part headers, a file name) on top of
 * GATEWAY_MAX_ATTACHMENT_BYTES. The runtime enforces the exact file size; this bounds what the gateway streams.
 */
export const MULTIPART_OVERHEAD_BYTES = 16 * 1024

/**
 * A pass-through stream that fails with {@link PayloadTooLarge} as soon as more than `limit` bytes have gone
 * through it. Forwarding a chunked upload through it aborts the upstream request mid-way.
 */
export class ByteLimit extends Transform {
  readonly limit: number
  #seen = 0

  constructor(limit: number) {
    super()
    this.limit = limit
  }

  /** Bytes seen so far. */
  get seen(): number {
    return this.#seen
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#seen += chunk.length
    if (this.#seen > this.limit) {
      callback(new PayloadTooLarge(this.limit))
      return
    }
    callback(null, chunk)
  }
}

/** The byte limit applied to a multipart upload for a given GATEWAY_MAX_ATTACHMENT_BYTES. */
export function uploadLimit(maxAttachmentBytes: number): number {
  return maxAttachmentBytes + MULTIPART_OVERHEAD_BYTES
}

/** Whether a parsed body is a JSON body from {@link registerBodyParsers}. */
export function isJsonBody(body: unknown): body is JsonBody {
  return (
    body !== null && typeof body === 'object' && Buffer.isBuffer((body as JsonBody).raw) && 'value' in body
  )
}

/**
 * Replaces every content-type parser of `app` (an encapsulated route plugin) with two: JSON kept raw and
 * parsed (up to `maxJsonBytes`, else 413; not a JSON object: marked invalid), and multipart/form-data returned as the
 * request stream through a {@link ByteLimit} (a Content-Length over the limit: 413 before anything is read).
 * Every other content type gets 415 from Fastify. Either 413 is a {@link PayloadTooLarge}, whose answer says
 * the limit.
 */
export function registerBodyParsers(
  app: FastifyInstance,
  limits: { maxJsonBytes: number; maxAttachmentBytes: number },
): void {
  app.removeAllContentTypeParsers()
  // Fastify reads the JSON body and refuses it over the limit without saying the limit: the answer must,
  // so a person learns how far over it their message is. Everything else goes to the app's handler as is.
  app.setErrorHandler((err) => {
    if ((err as FastifyError).code === 'FST_ERR_CTP_BODY_TOO_LARGE')
      throw new PayloadTooLarge(limits.maxJsonBytes, { cause: err })
    throw err
  })

  app.addContentTypeParser(
    'application/json',
    { parseAs: 'buffer', bodyLimit: limits.maxJsonBytes },
    (request, raw, done) => {
      const buffer = raw as Buffer
      const contentType = request.headers['content-type'] ?? 'application/json'
      let value: unknown
      try {
        value = JSON.parse(buffer.toString('utf8'))
      } catch {
        done(null, { raw: buffer, contentType, value: {}, invalid: 'body is not valid JSON' } as JsonBody)
        return
      }
      if (value === null || typeof value !== 'object' || Array.isArray(value)) {
        done(null, { raw: buffer, contentType, value: {}, invalid: 'body must be a JSON object' } as JsonBody)
        return
      }
      done(null, { raw: buffer, contentType, value: value as Record<string, unknown> } as JsonBody)
    },
  )

  const limit = uploadLimit(limits.maxAttachmentBytes)
  app.addContentTypeParser('multipart/form-data', (request, payload: IncomingMessage, done) => {
    const declared = request.headers['content-length']
    if (declared !== undefined && Number(declared) > limit) {
      done(new PayloadTooLarge(limit), undefined)
      return
    }
    // Always a counter in between, also under a Content-Length that already bounds the body: undici destroys
    // the body it was given when the runtime breaks off, and the request itself destroyed takes the client's
    // 502 with it (test/upstream/upload.test.ts, a runtime that breaks off an upload).
    const counter = new ByteLimit(limit)
    // Not pipeline(): it would destroy the request on a limit error, and with it the socket the 413 must
    // go out on. Over the limit, the rest is discarded while the 413 is written (with Connection: close).
    payload.pipe(counter)
    counter.on('error', () => {
      payload.unpipe(counter)
      payload.resume()
    })
    // A client that aborts mid-upload destroys the counter, which aborts the upstream request.
    finished(payload, (err) => {
      if (err) counter.destroy(err)
    })
    done(null, counter)
  })
}
