import {
  type EscalationState,
  type EscalationStep,
  escalationField,
  isEscalationField,
  parseEscalationState,
  type StepTarget,
  type TargetKind,
} from '../escalation/state.ts'

/**
 * A question's escalation as the console's overview shows it (to viewers too): the steps, when each went
 * out, to what kind of target under which label, and the next one. Built field by field from the board
 * record, so whatever else a record of another version carries never reaches a browser.
 */
export interface EscalationView {
  readonly openedAt: string
  readonly steps: readonly EscalationStep[]
  readonly next: { readonly step: number; readonly at: string } | null
}

const KINDS: ReadonlySet<string> = new Set<TargetKind>(['webhook', 'slack', 'msteams', 'person', 'pagerduty'])
const STATES: ReadonlySet<string> = new Set<EscalationStep['state']>([
  'sent',
  'due',
  'stopped',
  'beyond_deadline',
])
/** Steps and targets shown per question: a notify file has a handful; a broken record must not flood a frame. */
const MAX_STEPS = 20
const MAX_TARGETS = 20
const MAX_LABEL = 120

const text = (v: unknown, max: number): string | null =>
  typeof v === 'string' ? (v.length > max ? `${v.slice(0, max - 1)}…` : v) : null

const time = (v: unknown): string | null =>
  typeof v === 'string' && !Number.isNaN(Date.parse(v)) ? new Date(Date.parse(v)).toISOString() : null

const count = (v: unknown): number | null =>
  typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : null

function targetView(raw: unknown): StepTarget | null {
  if (typeof raw !== 'object' || raw === null) return null
  const t = raw as Record<string, unknown>
  const label = text(t.label, MAX_LABEL)
  if (typeof t.kind !== 'string' || !KINDS.has(t.kind) || label === null) return null
  if (t.outcome !== 'sent' && t.outcome !== 'skipped' && t.outcome !== 'planned') return null
  const reason = t.outcome === 'skipped' ? text(t.reason, 40) : null
  return {
    kind: t.kind as TargetKind,
    label,
    outcome: t.outcome,
    ...(reason === null ? {} : { reason }),
  }
}

function stepView(raw: unknown): EscalationStep | null {
  if (typeof raw !== 'object' || raw === null) return null
  const s = raw as Record<string, unknown>
  const step = count(s.step)
  const afterS = count(s.afterS)
  if (step === null || afterS === null || typeof s.state !== 'string' || !STATES.has(s.state)) return null
  const targets = Array.isArray(s.targets)
    ? s.targets
        .slice(0, MAX_TARGETS)
        .map(targetView)
        .filter((t): t is StepTarget => t !== null)
    : []
  return { step, afterS, state: s.state as EscalationStep['state'], at: time(s.at), targets }
}

/** The viewer-safe view of an escalation record; null when it has no readable time of opening. */
export function escalationView(state: EscalationState): EscalationView | null {
  const openedAt = time(state.openedAt)
  if (openedAt === null) return null
  const steps = state.steps
    .slice(0, MAX_STEPS)
    .map(stepView)
    .filter((s): s is EscalationStep => s !== null)
  const nextStep = count(state.next?.step)
  const nextAt = time(state.next?.at)
  return {
    openedAt,
    steps,
    next: nextStep === null || nextAt === null ? null : { step: nextStep, at: nextAt },
  }
}

/** `run`'s escalation records among a session's board fields, by item (a request id, or `escalation`). */
export function escalationsIn(fields: ReadonlyMap<string, string>, run: string): Map<string, EscalationView> {
  const out = new Map<string, EscalationView>()
  const prefix = escalationField(run, '')
  for (const [key, value] of fields) {
    if (!isEscalationField(key, run)) continue
    const state = parseEscalationState(value)
    const view = state === null ? null : escalationView(state)
    if (view !== null) out.set(key.slice(prefix.length), view)
  }
  return out
}
