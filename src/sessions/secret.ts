import { timingSafeEqual } from 'node:crypto'
import { inspect } from 'node:util'

/**
 * A messaging token held in memory. It cannot be logged, serialised or string-interpolated by accident:
 * only {@link Secret.reveal} gives the value, and the one caller that needs it is the upstream header policy.
 */
export class Secret {
  readonly #value: string

  constructor(value: string) {
    this.#value = value
  }

  /** The raw value; call only where it is sent upstream or encrypted at rest. */
  reveal(): string {
    return this.#value
  }

  /**
   * Whether both hold the same value, compared in constant time for equal lengths; the registry uses it to
   * tell a token rotation (version bump) from an unchanged reload without revealing either value.
   */
  equals(other: Secret): boolean {
    const a = Buffer.from(this.#value)
    const b = Buffer.from(other.#value)
    return a.length === b.length && timingSafeEqual(a, b)
  }

  toString(): string {
    return '[secret]'
  }

  toJSON(): string {
    return '[secret]'
  }

  [inspect.custom](): string {
    return '[secret]'
  }
}
