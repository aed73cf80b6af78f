/**
 * Where a group's questions went: every question in exactly one outcome (answered in time or late, timed out,
 * cancelled, ended with its run, still open, or closed some other way), so the parts add up to the total on
 * the page, as a proportional bar and a list of counts with their total.
 */

import type { QuestionStats } from '../../../report/stats.ts'
import { h } from '../dom.ts'
import { PARTS, svg } from './chart.ts'

type Key = (typeof PARTS)[number]['key'] | 'cancelled' | 'runEnded' | 'stillOpen' | 'other'

export interface Outcome {
  readonly key: Key
  readonly label: string
  readonly cls: string
}

/** Every outcome, in the order the page shows them (the chart's parts first, in its colours). */
const OUTCOMES: readonly Outcome[] = [
  ...PARTS,
  { key: 'cancelled', label: 'Cancelled', cls: 'bar-cancelled' },
  { key: 'runEnded', label: 'Ended with the run', cls: 'bar-run-ended' },
  { key: 'stillOpen', label: 'Still open', cls: 'bar-open' },
  { key: 'other', label: 'Closed otherwise', cls: 'bar-other' },
]

/** The outcomes to show for `groups`: all, but "closed otherwise" only when one of them has such a question. */
export function outcomesOf(groups: readonly QuestionStats[]): readonly Outcome[] {
  return groups.some((q) => q.other > 0) ? OUTCOMES : OUTCOMES.filter((o) => o.key !== 'other')
}

/** The bar of `q`'s outcomes, each as wide as its share (decorative: the list says the same). */
function bar(q: QuestionStats, outcomes: readonly Outcome[]): SVGSVGElement {
  const root = svg('svg', {
    class: 'outcome-bar',
    width: '100%',
    height: 14,
    viewBox: '0 0 1000 14',
    preserveAspectRatio: 'none',
    'aria-hidden': 'true',
    focusable: 'false',
  })
  let x = 0
  for (const o of outcomes) {
    const n = q[o.key]
    if (n === 0 || q.questions === 0) continue
    const width = (n / q.questions) * 1000
    root.append(svg('rect', { class: o.cls, x, y: 0, width, height: 14 }))
    x += width
  }
  return root
}

/** The section "Where the N questions went": the bar, each outcome's count, the total, and what "in time" counts. */
export function outcomesSection(q: QuestionStats, outcomes: readonly Outcome[]): HTMLElement {
  return h(
    'section',
    { 'aria-labelledby': 'outcomes-title' },
    h(
      'h2',
      { id: 'outcomes-title' },
      `Where the ${q.questions} ${q.questions === 1 ? 'question' : 'questions'} went`,
    ),
    q.questions === 0 ? null : bar(q, outcomes),
    h(
      'ul',
      { class: 'outcomes' },
      ...outcomes.map((o) =>
        h(
          'li',
          {},
          h('span', { class: `swatch ${o.cls}`, 'aria-hidden': 'true' }),
          h('span', { class: 'outcome' }, o.label),
          h('span', { class: 'outcome-count' }, String(q[o.key])),
        ),
      ),
      h(
        'li',
        { class: 'total' },
        h('span', { class: 'outcome' }, 'All questions'),
        h('span', { class: 'outcome-count' }, String(q.questions)),
      ),
    ),
    h(
      'p',
      { class: 'muted' },
      'Questions that closed in this period, and those asked in it that are still open. “In time” counts the questions that waited for a person until they closed: those answered and those that timed out.',
    ),
  )
}
