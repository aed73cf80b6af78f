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
