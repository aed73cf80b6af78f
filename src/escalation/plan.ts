import { chatTargetsFor, type NotifyRoutes, personTargetsFor, targetsFor } from '../notify/targets.ts'
import type { EscalationState, EscalationStep, StepTarget, TargetKind } from './state.ts'

/** A target of a team's plan: its kind, label and step time. */
export interface PlannedTarget {
  readonly kind: TargetKind
  readonly label: string
  readonly afterS: number
}

/**
 * Every target of a session of `team`, with its `after_s`: webhooks (and pagers), chat channels when a chat
 * adapter sends (`chat`), people. File order within each kind.
 */
export function plannedTargets(routes: NotifyRoutes, team: string, chat: boolean): PlannedTarget[] {
  return [
    ...targetsFor(routes, team).map((t) => ({
      kind: (t.format === 'pagerduty' ? 'pagerduty' : 'webhook') as TargetKind,
      label: t.label,
      afterS: t.afterS ?? 0,
    })),
    ...(chat ? chatTargetsFor(routes, team) : []).map((t) => ({
      kind: t.chat as TargetKind,
      label: t.label,
      afterS: t.afterS ?? 0,
    })),
    ...personTargetsFor(routes, team).map((t) => ({
      kind: 'person' as TargetKind,
      label: t.label,
      afterS: t.afterS,
    })),
  ]
}

/** What a plan is made for: the question (or pause), when it was first seen, and its deadline. */
export interface PlanInput {
  readonly run: string
  readonly item: string
  readonly seq: number
  /** ms since epoch: when the gateway first saw it open (never a runtime-supplied time alone). */
  readonly openedAt: number
  /** ISO 8601; null: no deadline (every step may go out). */
  readonly deadline: string | null
}

/**
 * The fixed plan of a question: step 0 = the targets with `after_s` 0, steps 1..k = the distinct positive
 * `after_s` ascending. A step due after the deadline is `beyond_deadline` from the start (never sent); the
 * others are `due`. Step 0 exists even without targets, so step numbers match `after_s` order.
 */
export function makePlan(targets: readonly PlannedTarget[], input: PlanInput): EscalationState {
  const times = [...new Set([0, ...targets.map((t) => t.afterS)])].sort((a, b) => a - b)
  const deadline = Date.parse(input.deadline ?? '')
  const steps: EscalationStep[] = times.map((afterS, step) => {
    const late = step > 0 && !Number.isNaN(deadline) && input.openedAt + afterS * 1000 > deadline
    return {
      step,
      afterS,
      state: late ? 'beyond_deadline' : 'due',
      at: null,
      targets: targets
        .filter((t) => t.afterS === afterS)
        .map((t): StepTarget => ({ kind: t.kind, label: t.label, outcome: 'planned' })),
    }
  })
  const state: EscalationState = {
    run: input.run,
    item: input.item,
    openedAt: new Date(input.openedAt).toISOString(),
    seq: input.seq,
    deadline: input.deadline,
    steps,
    next: null,
  }
  return withNext(state, false)
}

/** When a step is due (ms since epoch). */
export function dueAt(state: EscalationState, step: EscalationStep): number {
  return Date.parse(state.openedAt) + step.afterS * 1000
}

/** The record with `next` set: the first `due` step, or null when none remains or a person holds it. */
export function withNext(state: EscalationState, held: boolean): EscalationState {
  const step = held ? undefined : state.steps.find((s) => s.state === 'due')
  return {
    ...state,
    next: step === undefined ? null : { step: step.step, at: new Date(dueAt(state, step)).toISOString() },
  }
}

/** The targets notified so far: those sent in steps that went out. */
export function notifiedTargets(state: EscalationState): StepTarget[] {
  return state.steps
    .filter((s) => s.state === 'sent')
    .flatMap((s) => s.targets.filter((t) => t.outcome === 'sent'))
}

/** The record once the question closed: steps not gone out are `stopped`, nothing is next. */
export function stopped(state: EscalationState): EscalationState {
  return {
    ...state,
    steps: state.steps.map((s) => (s.state === 'due' ? { ...s, state: 'stopped' } : s)),
    next: null,
  }
}
