import { api, base } from './api.ts'

/** A person and when they did it, from the gateway's audit log. */
export interface Actor {
  readonly name: string
  readonly at: string
}

interface ActivityAnswer {
  messages: { key: string; name: string; at: string }[]
  actions: { key: string; action: string; name: string; at: string }[]
}

/** How often a key the audit log does not know yet is asked again: its record is written after the answer. */
const RETRY_MS = 1500
/** Then it is settled as not sent through the gateway (or older than what the log holds). */
const RETRIES = 3

/**
 * Who did what in the session's run through the gateway (`api/sessions/:kasmId/activity`): who sent each
 * message (by its idempotency key) and who took each control action. Asked once per run and again, a few
 * times, for keys it does not know yet; `onChange` runs when something new is known.
 */
export class RunActivity {
  readonly #path: string
  readonly #onChange: () => void
  #run: string | null = null
  readonly #messages = new Map<string, Actor>()
  readonly #actions = new Map<string, Actor & { action: string }>()
  /** Keys asked for and not known, with the attempts left. */
  readonly #wanted = new Map<string, number>()
  #timer: number | null = null
  #inFlight = false
  /** Asked again while a request was in flight: ask once it is back. */
  #pending = false

  constructor(kasmId: string, onChange: () => void) {
    this.#path = `${base}api/sessions/${encodeURIComponent(kasmId)}/activity`
    this.#onChange = onChange
  }

  /** A new run: nothing of the old one applies. */
  startRun(run: string): void {
    this.#run = run
    this.#messages.clear()
    this.#actions.clear()
    this.#wanted.clear()
    this.#schedule(0)
  }

  stop(): void {
    if (this.#timer !== null) window.clearTimeout(this.#timer)
    this.#timer = null
    this.#run = null
  }

  /**
   * Who sent the message under `key`: the person, `null` once the log has been asked enough and does not
   * know (not sent through this gateway), `undefined` while it is being asked.
   */
  sender(key: string): Actor | null | undefined {
    return this.#lookup(this.#messages, key)
  }

  /** Who took the action under `key` (see {@link sender}). */
  actor(key: string): Actor | null | undefined {
    return this.#lookup(this.#actions, key)
  }

  #lookup<T>(map: Map<string, T>, key: string): T | null | undefined {
    const known = map.get(key)
    if (known !== undefined) return known
    const left = this.#wanted.get(key)
    if (left === 0) return null
    if (left === undefined) {
      this.#wanted.set(key, RETRIES)
      this.#schedule(0)
    }
    return undefined
  }

  #schedule(ms: number): void {
    if (this.#timer !== null || this.#run === null) return
    this.#timer = window.setTimeout(() => {
      this.#timer = null
      void this.#fetch()
    }, ms)
  }

  async #fetch(): Promise<void> {
    const run = this.#run
    if (run === null) return
    if (this.#inFlight) {
      this.#pending = true
      return
    }
    this.#inFlight = true
    let answer: ActivityAnswer | null = null
    try {
      answer = await api<ActivityAnswer>(`${this.#path}?run=${encodeURIComponent(run)}`)
    } catch {
      answer = null
    } finally {
      this.#inFlight = false
    }
    if (this.#run !== run) return
    let changed = false
    for (const m of answer?.messages ?? []) {
      if (this.#messages.has(m.key)) continue
      this.#messages.set(m.key, { name: m.name, at: m.at })
      changed = true
    }
    for (const a of answer?.actions ?? []) {
      if (this.#actions.has(a.key)) continue
      this.#actions.set(a.key, { name: a.name, at: a.at, action: a.action })
      changed = true
    }
    let again = false
    for (const [key, left] of this.#wanted) {
      if (this.#messages.has(key) || this.#actions.has(key)) this.#wanted.delete(key)
      else if (left > 0) {
        this.#wanted.set(key, left - 1)
        // Settled as unknown: that is news too (the page stops waiting for a name).
        if (left === 1) changed = true
        else again = true
      }
    }
    if (this.#pending) {
      this.#pending = false
      this.#schedule(0)
    } else if (again) this.#schedule(RETRY_MS)
    if (changed) this.#onChange()
  }
}
