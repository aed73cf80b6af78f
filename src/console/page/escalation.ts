import type { EscalationStep, StepTarget } from '../../escalation/state.ts'
import type { EscalationView } from '../../overview/escalations.ts'
import { countdown } from './countdown.ts'
import { h, replace } from './dom.ts'
import { timeOf } from './format.ts'

/**
 * A question's escalation in a person's words: which steps went out when ("Posted in Slack C0123",
 * "Messaged olivia", "On-call paged", "Webhook team:red#2"), which were skipped and why, and what comes next
 * ("On-call paged in 0:40"). The countdown is a `<time>` the page's one ticker refreshes, outside any live
 * region, so a screen reader reads it when asked and is never told the time every second.
 */

/** What a target of a step did (or will do), as a phrase that also reads before "in 0:40". */
export function targetPhrase(target: Pick<StepTarget, 'kind' | 'label'>): string {
  const name = target.label.replace(/^[a-z]+:/, '')
  switch (target.kind) {
    case 'slack':
      return `Posted in Slack ${name}`
    case 'msteams':
      return `Posted in Teams ${name}`
    case 'person':
      // `person:olivia/slack`: the person, through the chat named after the slash.
      return `Messaged ${name.replace(/\/[a-z]+$/, '')}`
    case 'pagerduty':
      return 'On-call paged'
    default:
      return `Webhook ${target.label}`
  }
}

/** Why a target was skipped, in words. */
function skipReason(reason: string | undefined): string {
  if (reason === 'no_linked_account') return 'no linked chat account'
  return reason === undefined ? 'skipped' : reason.replaceAll('_', ' ')
}

/** The phrase of a whole step: its targets' phrases (pages and messages once each). */
function stepPhrase(step: EscalationStep): string {
  const phrases = step.targets.filter((t) => t.outcome === 'sent').map(targetPhrase)
  return [...new Set(phrases)].join(', ')
}

/** `after 1:30` from the opening. */
function afterText(s: number): string {
  const m = Math.floor(s / 60)
  return `${m}:${String(s % 60).padStart(2, '0')}`
}

function stepItem(step: EscalationStep, nextStep: number | null): HTMLLIElement {
  const skipped = step.targets.filter((t) => t.outcome === 'skipped')
  const label = step.step === 0 ? 'First notice' : `Step ${step.step}`
  const phrase = stepPhrase(step)
  const everyTarget = [...new Set(step.targets.map(targetPhrase))].join(', ')
  let what: (Node | string | null)[]
  switch (step.state) {
    case 'sent':
      what = [
        phrase === '' ? 'nothing sent' : phrase,
        step.at === null ? null : ' at ',
        step.at === null ? null : timeOf(step.at, 'step-at'),
      ]
      break
    case 'due':
      what = [
        `${everyTarget}, due ${afterText(step.afterS)} after it opened${step.step === nextStep ? ' (next)' : ''}`,
      ]
      break
    case 'beyond_deadline':
      what = [`${everyTarget}: not sent, after the deadline (${afterText(step.afterS)})`]
      break
    default:
      what = [`${everyTarget}: not sent, stopped`]
  }
  return h(
    'li',
    { class: `step step-${step.state}`, 'data-step': step.step },
    h('span', { class: 'step-name' }, `${label}: `),
    ...what,
    ...skipped.map((t) =>
      h(
        'span',
        { class: 'step-skipped' },
        ` (${targetPhrase(t).replace(/^Messaged /, '')} not reached: ${skipReason(t.reason)})`,
      ),
    ),
  )
}

/**
 * Fills `el` with an escalation (empty when there is none): the steps as a list, and a line saying what
 * comes next and when, or that the steps wait for `holder` (`you` when it is this person).
 */
export function renderEscalation(el: HTMLElement, view: EscalationView | null, holder: string | null): void {
  if (view === null || view.steps.length === 0) {
    el.hidden = true
    replace(el)
    return
  }
  el.hidden = false
  const nextStep = view.next?.step ?? null
  const next = view.steps.find((s) => s.step === nextStep)
  const pending = view.steps.some((s) => s.state === 'due')
  let line: (Node | string)[]
  if (next !== undefined && view.next !== null)
    line = [
      `${[...new Set(next.targets.map(targetPhrase))].join(', ')} in `,
      countdown(view.next.at, { suffix: '.' }),
    ]
  else if (pending && holder !== null)
    line = [`Further steps wait while ${holder === 'you' ? 'you are' : `${holder} is`} on it.`]
  else if (pending) line = ['Further steps are waiting.']
  else line = ['No further steps.']
  replace(
    el,
    h('p', { class: 'escalation-next' }, ...line),
    h(
      'ol',
      { class: 'steps', 'aria-label': 'Escalation steps' },
      ...view.steps.map((s) => stepItem(s, nextStep)),
    ),
  )
}
