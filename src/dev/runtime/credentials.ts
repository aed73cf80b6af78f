import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import { HttpError } from './http-error.ts'

/** The header that carries either token; `?token=` where a header cannot be set. */
export const TOKEN_HEADER = 'x-kasm-runtime-session-token'

/** Who a request speaks for, from its credential. */
export type Sender = 'operator' | 'orchestrator'

/**
 * What a route needs:
 * - `observe`: GETs; open unless the observe token is required, then either token (503 with none configured);
 * - `write`: the messaging or the session token;
 * - `session`: the session token only (the messaging token gets 403).
 */
export type Access = 'observe' | 'write' | 'session'

/** Route config read by the access hook. `inbox` routes are absent (404) when no token is configured. */
export interface RouteAccess {
  access: Access
  inbox: boolean
}

type Presented = { kind: 'missing' } | { kind: 'invalid' } | { kind: 'valid'; sender: Sender }

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest()
}

/** Compares digests so the comparison's time says nothing about the token's length or prefix. */
function matches(presented: Buffer, expected: Buffer | null): boolean {
  return expected !== null && timingSafeEqual(presented, expected)
}

/** The two runtime tokens, rotatable at run time, and the access rules of the protocol's credential table. */
export class Credentials {
  private messaging: Buffer | null = null
  private session: Buffer | null = null
  private readonly observeTokenRequired: boolean

  constructor(tokens: { messagingToken?: string; sessionToken?: string }, observeTokenRequired: boolean) {
    this.observeTokenRequired = observeTokenRequired
    this.rotate(tokens)
  }

  /** Replaces the given tokens (an empty string removes one); requests with the old ones get 401. */
  rotate(tokens: { messagingToken?: string; sessionToken?: string }): void {
    if (tokens.messagingToken !== undefined) {
      this.messaging = tokens.messagingToken === '' ? null : digest(tokens.messagingToken)
    }
    if (tokens.sessionToken !== undefined) {
      this.session = tokens.sessionToken === '' ? null : digest(tokens.sessionToken)
    }
  }

  /** The inbox exists when either token is configured. */
  get inboxEnabled(): boolean {
    return this.messaging !== null || this.session !== null
  }

  /**
   * Enforces `rule` on a request; returns the sender when a valid credential was presented. A credential is
   * not checked where none is needed (an open observe read), as the runtime does.
   */
  check(request: FastifyRequest, rule: RouteAccess): Sender | null {
    if (rule.inbox && !this.inboxEnabled) throw new HttpError(404, 'not_found', 'the inbox is not enabled')
    if (rule.access === 'observe') {
      if (!this.observeTokenRequired) return this.sender(request)
      if (!this.inboxEnabled) {
        throw new HttpError(503, 'no_token_configured', 'reads need a token and none is configured')
      }
    }
    const presented = this.identify(request)
    if (presented.kind === 'missing') throw new HttpError(401, 'unauthorized', 'a runtime token is required')
    if (presented.kind === 'invalid')
      throw new HttpError(401, 'unauthorized', 'the runtime token is not valid')
    if (rule.access === 'session' && presented.sender !== 'orchestrator') {
      throw new HttpError(403, 'forbidden', 'this route needs the session token')
    }
    return presented.sender
  }

  /** The sender a valid credential speaks for, or null. */
  sender(request: FastifyRequest): Sender | null {
    const presented = this.identify(request)
    return presented.kind === 'valid' ? presented.sender : null
  }

  private identify(request: FastifyRequest): Presented {
    const header = request.headers[TOKEN_HEADER]
    const query = (request.query as Record<string, unknown> | undefined)?.token
    let token: unknown = header
    if (header === undefined) token = query
    if (token === undefined) return { kind: 'missing' }
    if (typeof token !== 'string' || token === '') return { kind: 'invalid' }
    const presented = digest(token)
    // Session first: if a deployment set both tokens to one value, the stronger credential wins.
    if (matches(presented, this.session)) return { kind: 'valid', sender: 'orchestrator' }
    if (matches(presented, this.messaging)) return { kind: 'valid', sender: 'operator' }
    return { kind: 'invalid' }
  }
}
