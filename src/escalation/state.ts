/**
 * A question's (or handoff pause's) escalation as every replica and the console see it: kept on the
 * session's board (src/summary/board.ts) under {@link escalationField}, written by the replica that reads the
 * session (the one that sends), read by the console's overview. Names and target labels only: never a URL,
 * a routing key or a token.
 */

/** What kind of target a step notifies (also the `kind` label of the escalation metrics). */
export type TargetKind = 'webhook' | 'slack' | 'msteams' | 'person' | 'pagerduty'

/**
 * How one target of a step fared: notified, skipped with a reason (`no_linked_account`, `target_removed`),
 * or `planned` while its step has not gone out (due, stopped, beyond the deadline).
 */
export interface StepTarget {
  readonly kind: TargetKind
  /** The target's label (`team:red#2`, `slack:C0123ABCD`, `person:olivia`): never a URL or key. */
  readonly label: string
  readonly outcome: 'sent' | 'skipped' | 'planned'
  /** Why it was skipped (`no_linked_account`, `target_removed`); absent otherwise. */
  readonly reason?: string
}

/**
 * One step: the targets sharing an `after_s`. `sent` once it went out (`at` says when); `due` while it
 * waits; `stopped` when the question closed (or a person answered) before it; `beyond_deadline` when its
 * time is later than the question's deadline (never sent).
 */
export interface EscalationStep {
  readonly step: number
  readonly afterS: number
  readonly state: 'sent' | 'due' | 'stopped' | 'beyond_deadline'
  /** ISO 8601: when it went out; null until then. */
  readonly at: string | null
  readonly targets: readonly StepTarget[]
}

/**
 * A claim that lapsed (GATEWAY_CLAIM_TTL_S without an answer): whose, when it was taken, when it lapsed (ISO
 * 8601). The console tells its holder from it, so the notice is never guessed from a claim going away.
 */
export interface Lapse {
  readonly sub: string
  readonly name: string
  readonly claimedAt: string
  readonly at: string
}

/** The escalation record of one question (`item` = its request id) or handoff pause (`item` = `escalation`). */
export interface EscalationState {
  readonly run: string
  readonly item: string
  /** ISO 8601: when the gateway first saw it open (the origin of every `after_s`). */
  readonly openedAt: string
  /**
   * The seq of the event that opened it: a handoff pause of the same run that started later is another
   * pause (its record replaces this one). Absent in records of older versions.
   */
  readonly seq?: number
  /** ISO 8601: the question's deadline (the pause's end) when the plan was made; null when none. */
  readonly deadline?: string | null
  readonly steps: readonly EscalationStep[]
  /**
   * The next step and when it is due (ISO 8601); null when none remains or while a person holds the
   * question (then steps wait for the claim to lapse or be given back).
   */
  readonly next: { readonly step: number; readonly at: string } | null
  /**
   * The latest claim that lapsed on it, until its holder takes it again; null or absent (records of older
   * versions) when none did.
   */
  readonly lapsed?: Lapse | null
}

const PREFIX = 'escalation:'

/** The board field of a question's escalation record. */
export function escalationField(run: string, item: string): string {
  return `${PREFIX}${run}\u0000${item}`
}

/** Whether a board field is an escalation record of `run` (any item when `run` is omitted). */
export function isEscalationField(field: string, run?: string): boolean {
  return field.startsWith(run === undefined ? PREFIX : `${PREFIX}${run}\u0000`)
}

/** Parses a board value written by a replica of this or another version; null when it cannot be read. */
export function parseEscalationState(value: string): EscalationState | null {
  try {
    const s = JSON.parse(value) as Partial<EscalationState>
    if (
      typeof s.run !== 'string' ||
      typeof s.item !== 'string' ||
      typeof s.openedAt !== 'string' ||
      !Array.isArray(s.steps)
    )
      return null
    return {
      run: s.run,
      item: s.item,
      openedAt: s.openedAt,
      ...(typeof s.seq === 'number' ? { seq: s.seq } : {}),
      ...(s.deadline === undefined ? {} : { deadline: s.deadline }),
      steps: s.steps,
      next: s.next ?? null,
      lapsed: parseLapse(s.lapsed),
    }
  } catch {
    return null
  }
}

function parseLapse(v: unknown): Lapse | null {
  if (typeof v !== 'object' || v === null) return null
  const l = v as Record<string, unknown>
  return typeof l.sub === 'string' &&
    typeof l.name === 'string' &&
    typeof l.claimedAt === 'string' &&
    typeof l.at === 'string'
    ? { sub: l.sub, name: l.name, claimedAt: l.claimedAt, at: l.at }
    : null
}
