import type { FastifyBaseLogger } from 'fastify'
import { type CredentialHolder, recheckHolders } from '../auth/held-credentials.ts'
import type { Operator } from '../auth/operator.ts'

/**
 * The periodic recheck of the credentials open streams are held on: one timer for all of them, armed while
 * any is open, ending those whose credential expired or was revoked. Rounds never overlap.
 */
export class CredentialRecheck {
  readonly #holders: Iterable<CredentialHolder>
  readonly #intervalMs: number
  readonly #stillValid: (operator: Operator) => Promise<boolean>
  readonly #log: FastifyBaseLogger
  #timer: NodeJS.Timeout | null = null
  #running = false

  constructor(
    holders: Iterable<CredentialHolder>,
    intervalMs: number,
    stillValid: (operator: Operator) => Promise<boolean>,
    log: FastifyBaseLogger,
  ) {
    this.#holders = holders
    this.#intervalMs = intervalMs
    this.#stillValid = stillValid
    this.#log = log
  }

  /** Whether the periodic timer is armed. */
  get armed(): boolean {
    return this.#timer !== null
  }

  /** Arms the periodic check (idempotent). */
  arm(): void {
    if (this.#timer !== null) return
    this.#timer = setInterval(() => void this.run(), this.#intervalMs)
    this.#timer.unref()
  }

  /** Disarms it (the last stream ended, or shutdown). */
  disarm(): void {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
  }

  /** Checks every holder now; does nothing while a round is still running. */
  async run(): Promise<void> {
    if (this.#running) return
    this.#running = true
    try {
      await recheckHolders(
        this.#holders,
        (op) => this.#stillValid(op),
        (err) => this.#log.warn({ err }, 'credential recheck failed; streams kept until the next check'),
      )
    } finally {
      this.#running = false
    }
  }
}
