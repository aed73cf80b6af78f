import type { Operator } from '../auth/operator.ts'
import type { SessionBoard } from '../summary/board.ts'

/** Who said "I'm on it" for a question, and when (ISO 8601). Names only: never a credential. */
export interface Claim {
  readonly sub: string
  readonly name: string
  readonly at: string
}

/** What taking a question answered. */
export type ClaimResult =
  | { readonly taken: true; readonly claim: Claim }
  | { readonly taken: false; readonly holder: Claim }

const PREFIX = 'claim:'

function field(run: string, requestId: string): string {
  return `${PREFIX}${run}\u0000${requestId}`
}

function parse(value: string): Claim | null {
  try {
    const c = JSON.parse(value) as Partial<Claim>
    return typeof c.sub === 'string' && typeof c.name === 'string' && typeof c.at === 'string'
      ? { sub: c.sub, name: c.name, at: c.at }
      : null
  } catch {
    return null
  }
}

/**
 * "I'm on it" marks on questions, so a team does not answer the same one twice. Kept on the session's
 * {@link SessionBoard} (shared by every replica), keyed by run and request, one holder each; the holder (or
 * the question closing) releases it.
 */
export class Claims {
  readonly #board: SessionBoard

  constructor(board: SessionBoard) {
    this.#board = board
  }

  /** Takes a question for `operator`; a question someone else holds stays theirs. Taking it again is fine. */
  async take(kasmId: string, run: string, requestId: string, operator: Operator): Promise<ClaimResult> {
    const claim: Claim = {
      sub: operator.sub,
      name: operator.name ?? operator.sub,
      at: new Date().toISOString(),
    }
    const key = field(run, requestId)
    if (await this.#board.set(kasmId, key, JSON.stringify(claim), true)) return { taken: true, claim }
    const held = (await this.#board.read(kasmId)).get(key)
    const holder = held === undefined ? null : parse(held)
    if (holder === null) {
      // Released between the two calls, or not a mark this version can read: try once more.
      if (held !== undefined) await this.#board.delete(kasmId, key, held)
      return (await this.#board.set(kasmId, key, JSON.stringify(claim), true))
        ? { taken: true, claim }
        : { taken: false, holder: { sub: '', name: 'someone', at: claim.at } }
    }
    return holder.sub === operator.sub ? { taken: true, claim: holder } : { taken: false, holder }
  }

  /** Gives a question back; answers false when `operator` does not hold it (then it is left as it is). */
  async release(kasmId: string, run: string, requestId: string, operator: Operator): Promise<boolean> {
    const key = field(run, requestId)
    const held = (await this.#board.read(kasmId)).get(key)
    if (held === undefined || parse(held)?.sub !== operator.sub) return false
    return this.#board.delete(kasmId, key, held)
  }

  /** The question closed: its mark goes, whoever held it. */
  async clear(kasmId: string, run: string, requestId: string): Promise<void> {
    await this.#board.delete(kasmId, field(run, requestId))
  }

  /** The marks on `run`'s questions, by request id. */
  async of(kasmId: string, run: string): Promise<Map<string, Claim>> {
    return claimsIn(await this.#board.read(kasmId), run)
  }
}

/** The marks on `run`'s questions among a session's board fields (read once for several uses), by request id. */
export function claimsIn(fields: ReadonlyMap<string, string>, run: string): Map<string, Claim> {
  const out = new Map<string, Claim>()
  const prefix = field(run, '')
  for (const [key, value] of fields) {
    if (!key.startsWith(prefix)) continue
    const claim = parse(value)
    if (claim !== null) out.set(key.slice(prefix.length), claim)
  }
  return out
}

/** The board field of a question's claim (src/escalation watches claims come and go). */
export const claimField = field

/** Reads a claim's board value; null when this version cannot read it. */
export const parseClaim = parse
