import { randomBytes } from 'node:crypto'
import { Socket } from 'node:net'
import type { FastifyRequest } from 'fastify'
import type { Operator } from '../auth/operator.ts'

/** The header of an in-process request that acts for a person authenticated elsewhere (a chat platform). */
export const DELEGATION_HEADER = 'x-krg-delegation'

/** A delegation lives this long: the request it is minted for is made at once. */
const DELEGATION_MS = 30_000
/** Delegations held at most; more are refused (the oldest stay valid, a burst cannot grow the map). */
const MAX_DELEGATIONS = 10_000

/**
 * One-time credentials for requests the gateway makes to itself on a person's behalf, so an answer given in
 * a chat goes through exactly the path a browser's does (authorisation, rate limit, validation, token
 * injection, audit): `mint` an operator, send the value in {@link DELEGATION_HEADER} with `app.inject`,
 * and request authentication takes it once. It is honoured only on a request injected in this process (its
 * socket is light-my-request's stand-in, never a network socket): a value seen on the network is nothing,
 * whatever it holds.
 */
export class Delegations {
  readonly #pending = new Map<string, { operator: Operator; until: number }>()

  /** A fresh value for one request acting as `operator`; throws when too many are outstanding. */
  mint(operator: Operator): string {
    this.#sweep()
    if (this.#pending.size >= MAX_DELEGATIONS) throw new Error('too many delegated requests outstanding')
    const value = randomBytes(32).toString('base64url')
    this.#pending.set(value, { operator, until: Date.now() + DELEGATION_MS })
    return value
  }

  /** The operator a request was delegated, taken once; undefined for anything else. */
  take(request: FastifyRequest): Operator | undefined {
    const value = request.headers[DELEGATION_HEADER]
    if (typeof value !== 'string' || request.raw.socket instanceof Socket) return undefined
    const entry = this.#pending.get(value)
    if (entry === undefined) return undefined
    this.#pending.delete(value)
    return entry.until > Date.now() ? entry.operator : undefined
  }

  #sweep(): void {
    const now = Date.now()
    for (const [value, entry] of this.#pending) if (entry.until <= now) this.#pending.delete(value)
  }
}
