import { randomBytes } from 'node:crypto'
import type { OperatorClaims } from './claims.ts'
import { hashSessionId } from './cookie-sessions.ts'

/** How long a login ticket can be used. */
export const LOGIN_TICKET_TTL_MS = 10 * 60_000

interface Ticket {
  claims: OperatorClaims
  expiresAt: number
}

/**
 * One-time login tickets for the demo's sign-in link. Kept in this replica's memory only (the demo runs one
 * replica), by hash like cookie sessions, and deleted on first use whatever the outcome.
 */
export class LoginTickets {
  private readonly ttlMs: number
  readonly #tickets = new Map<string, Ticket>()
  readonly #sweeper: NodeJS.Timeout

  constructor(ttlMs = LOGIN_TICKET_TTL_MS) {
    this.ttlMs = ttlMs
    this.#sweeper = setInterval(() => this.#sweep(), 60_000)
    this.#sweeper.unref()
  }

  /** Issues a ticket (32 random bytes, base64url) for these claims. */
  issue(claims: OperatorClaims): string {
    const ticket = randomBytes(32).toString('base64url')
    this.#tickets.set(hashSessionId(ticket), {
      claims: { ...claims, roles: [...claims.roles], teams: [...claims.teams] },
      expiresAt: Date.now() + this.ttlMs,
    })
    return ticket
  }

  /** Consumes a ticket: its claims when it is known and unexpired, else null. Never succeeds twice. */
  consume(ticket: string): OperatorClaims | null {
    const key = hashSessionId(ticket)
    const found = this.#tickets.get(key)
    if (!found) return null
    this.#tickets.delete(key)
    return found.expiresAt > Date.now() ? found.claims : null
  }

  close(): void {
    clearInterval(this.#sweeper)
    this.#tickets.clear()
  }

  #sweep(): void {
    const now = Date.now()
    for (const [key, t] of this.#tickets) if (t.expiresAt <= now) this.#tickets.delete(key)
  }
}
