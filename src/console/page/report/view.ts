/**
 * The report's view: what `GET <base>api/report` answered, as headline numbers, where the questions went
 * (parts that add up to the total), the chart of answers over time (with its table), the teams and the people
 * side by side, the timeouts (each linked to its session) and the handoffs. Everything from the gateway
 * becomes text nodes (dom.ts).
 */

import type { HandoffStats, PersonStats, QuestionStats, Report, TeamStats } from '../../../report/stats.ts'
import { base } from '../api.ts'
import { h, replace } from '../dom.ts'
import { bucketLabel, drawChart, PARTS } from './chart.ts'
import { type Outcome, outcomesOf, outcomesSection } from './outcomes.ts'

/** `42 s`, `3 min 05 s`, `1 h 12 min`; an em dash (read as "none") without a value. */
export function duration(seconds: number | null): string {
  if (seconds === null) return '—'
  const s = Math.round(seconds)
  if (s < 60) return `${s} s`
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`
}

function percent(share: number | null): string {
  return share === null ? '—' : `${Math.round(share * 100)}%`
}

/** A share with its count and denominator: `79% (11/14)`; a dash with nothing to count. */
function shareOf(count: number, of: number): string {
  return of === 0 ? '—' : `${percent(count / of)} (${count}/${of})`
}

/** How handoffs ended, in words: `1 finished, 2 ran out` (and those that ended with their run). */
function handoffEnds(hs: HandoffStats): string {
  const ends = [`${hs.byPerson} finished`, `${hs.ranOut} ran out`]
  if (hs.runEnded > 0) ends.push(`${hs.runEnded} ended with the run`)
  return ends.join(', ')
}

function when(iso: string): string {
  const d = new Date(iso)
  return d.toLocaleString([], { weekday: 'short', hour: '2-digit', minute: '2-digit' })
}

function time(iso: string): HTMLTimeElement {
  return h('time', { datetime: iso, title: new Date(iso).toLocaleString() }, when(iso))
}

function sessionLink(kasmId: string): HTMLAnchorElement {
  return h('a', { href: `${base}sessions/${encodeURIComponent(kasmId)}` }, kasmId)
}

/** A table in a box that scrolls sideways on a phone (focusable, so a keyboard can scroll it). */
function table(caption: string, head: readonly string[], rows: readonly (Node | string)[][]): HTMLElement {
  return h(
    'div',
    { class: 'table-scroll', tabindex: '0', role: 'region', 'aria-label': caption },
    h(
      'table',
      {},
      h('caption', { class: 'sr-only' }, caption),
      h('thead', {}, h('tr', {}, ...head.map((c) => h('th', { scope: 'col' }, c)))),
      h(
        'tbody',
        {},
        ...rows.map((cells) =>
          h('tr', {}, ...cells.map((c, i) => (i === 0 ? h('th', { scope: 'row' }, c) : h('td', {}, c)))),
        ),
      ),
    ),
  )
}

function card(label: string, value: string, detail?: string, tone?: 'good' | 'bad' | 'warn'): HTMLElement {
  return h(
    'div',
    { class: tone === undefined ? 'card' : `card card-${tone}` },
    h('dt', {}, label),
    h(
      'dd',
      {},
      h('span', { class: 'value' }, value),
      detail === undefined ? null : h('span', { class: 'detail' }, detail),
    ),
  )
}

function inTimeTone(q: QuestionStats): 'good' | 'bad' | 'warn' | undefined {
  if (q.inTimeShare === null) return undefined
  return q.inTimeShare >= 0.9 ? 'good' : q.inTimeShare >= 0.6 ? 'warn' : 'bad'
}

function headline(all: TeamStats): HTMLElement {
  const q = all.questions
  const hs = all.handoffs
  return h(
    'dl',
    { class: 'cards' },
    card('Questions', String(q.questions), `${q.answered} answered`),
    card(
      'Answered in time',
      percent(q.inTimeShare),
      `${q.inTime} of the ${q.waited} answered or timed out`,
      inTimeTone(q),
    ),
    card('Median time to answer', duration(q.medianAnswerS), `p90 ${duration(q.p90AnswerS)}`),
    card(
      'Timeouts',
      String(q.timeouts),
      q.late > 0 ? `${q.late} answered late` : undefined,
      q.timeouts > 0 ? 'bad' : undefined,
    ),
    card('Handoffs', String(hs.handoffs), hs.handoffs === 0 ? undefined : handoffEnds(hs)),
  )
}

/** A team's questions: the total, each outcome (they add up to it), the in-time share, the answer times. */
function questionCells(q: QuestionStats, outcomes: readonly Outcome[]): string[] {
  return [
    String(q.questions),
    ...outcomes.map((o) => String(q[o.key])),
    shareOf(q.inTime, q.waited),
    duration(q.medianAnswerS),
    duration(q.p90AnswerS),
  ]
}

function handoffCells(hs: HandoffStats): string[] {
  return [String(hs.handoffs), String(hs.byPerson), String(hs.ranOut), duration(hs.medianWaitS)]
}

function teamsTable(teams: readonly TeamStats[]): HTMLElement {
  const outcomes = outcomesOf(teams.map((t) => t.questions))
  return table(
    'Questions and handoffs by team',
    [
      'Team',
      'Questions',
      ...outcomes.map((o) => o.label),
      'In time (of answered or timed out)',
      'Median answer',
      'p90 answer',
      'Handoffs',
      'Finished',
      'Ran out',
      'Median wait',
    ],
    teams.map((t) => [t.team, ...questionCells(t.questions, outcomes), ...handoffCells(t.handoffs)]),
  )
}

function channels(q: QuestionStats): string {
  const used = Object.entries(q.via).filter(([, n]) => n > 0)
  return used.length === 0 ? '—' : used.map(([via, n]) => `${via} ${n}`).join(', ')
}

function peopleTable(people: readonly PersonStats[]): HTMLElement {
  return table(
    'Answers and handoffs by person',
    ['Person', 'Answered', 'In time', 'Late', 'Median', 'p90', 'Through', 'Handoffs finished', 'Median wait'],
    people.map((p) => [
      p.name ?? p.sub,
      String(p.questions.answered),
      shareOf(p.questions.inTime, p.questions.answered),
      String(p.questions.late),
      duration(p.questions.medianAnswerS),
      duration(p.questions.p90AnswerS),
      channels(p.questions),
      String(p.handoffs.byPerson),
      duration(p.handoffs.medianWaitS),
    ]),
  )
}

const ENDED_BY: Record<string, string> = {
  operator: 'a person finished it',
  timeout: 'ran out',
  run_end: 'the run ended',
}

function chartSection(report: Report, observers: ResizeObserver[]): HTMLElement {
  const box = h('div', { class: 'chart-box' })
  const answers = report.series.reduce((n, b) => n + b.inTime + b.late + b.timeouts, 0)
  const summary = h(
    'p',
    { class: 'muted', id: 'chart-summary' },
    answers === 0
      ? 'No question was answered or timed out in this period.'
      : `${report.all.questions.inTime} answered in time, ${report.all.questions.late} late and ${report.all.questions.timeouts} timed out, per ${report.bucketS >= 6 * 3600 ? 'six hours' : 'hour'}.`,
  )
  const draw = (): void => {
    const width = Math.floor(box.clientWidth)
    if (width > 0) replace(box, drawChart(report.series, report.bucketS, width))
  }
  // Drawn at its real width (text stays legible on a phone), again when the width changes.
  const observer = new ResizeObserver(draw)
  observer.observe(box)
  observers.push(observer)
  const legend = h(
    'ul',
    { class: 'legend' },
    ...PARTS.map((p) => h('li', {}, h('span', { class: `swatch ${p.cls}`, 'aria-hidden': 'true' }), p.label)),
  )
  const rows = report.series.map((b) => [
    bucketLabel(b.start),
    String(b.inTime),
    String(b.late),
    String(b.timeouts),
  ])
  return h(
    'section',
    { 'aria-labelledby': 'chart-title' },
    h('h2', { id: 'chart-title' }, 'Answers over time'),
    summary,
    box,
    legend,
    h(
      'details',
      {},
      h('summary', {}, 'Show the numbers'),
      table('Answers over time, in numbers', ['From', ...PARTS.map((p) => p.label)], rows),
    ),
  )
}

/** Step keys (`0`…`5`, `6+`) in order. */
function stepOrder(a: string, b: string): number {
  return Number.parseInt(a, 10) - Number.parseInt(b, 10)
}

/** How many questions ended by each step: `3 (after step 2: 2, before any escalation: 1)`. */
function byStepText(counts: Readonly<Record<string, number>>): string {
  const entries = Object.entries(counts).sort(([a], [b]) => stepOrder(b, a))
  const total = entries.reduce((n, [, c]) => n + c, 0)
  if (total === 0) return '0'
  const parts = entries.map(([s, c]) => `${s === '0' ? 'before any escalation' : `after step ${s}`}: ${c}`)
  return `${total} (${parts.join(', ')})`
}

/**
 * How questions ended by escalation step, per team and per person: answered before any escalation (only the
 * first notice went out), answered after step N, timed out (with the last step sent).
 */
function stepsSection(report: Report): HTMLElement {
  const groups: { who: string; q: QuestionStats; person: boolean }[] = [
    ...(report.teams.length > 1 ? report.teams : [report.all]).map((t) => ({
      who: t.team === '' ? 'Every team shown' : `Team ${t.team}`,
      q: t.questions,
      person: false,
    })),
    ...report.all.people.map((p) => ({ who: p.name ?? p.sub, q: p.questions, person: true })),
  ]
  const steps = [
    ...new Set(groups.flatMap((g) => Object.keys(g.q.bySteps.answered)).filter((s) => s !== '0')),
  ].sort(stepOrder)
  return h(
    'section',
    { 'aria-labelledby': 'steps-title' },
    h('h2', { id: 'steps-title' }, 'By escalation step'),
    table(
      'How questions ended by escalation step',
      [
        'Who',
        'Answered before any escalation',
        ...steps.map((s) => `Answered after step ${s}`),
        'Timed out (last step sent)',
      ],
      groups.map((g) => [
        g.who,
        String(g.q.bySteps.answered['0'] ?? 0),
        ...steps.map((s) => String(g.q.bySteps.answered[s] ?? 0)),
        g.person ? '—' : byStepText(g.q.bySteps.timedOut),
      ]),
    ),
  )
}

function timeoutsSection(report: Report): HTMLElement {
  const list = report.timeouts
  return h(
    'section',
    { 'aria-labelledby': 'timeouts-title' },
    h('h2', { id: 'timeouts-title' }, 'Timeouts'),
    list.length === 0
      ? h('p', { class: 'muted' }, 'No question timed out in this period.')
      : table(
          'Questions that timed out',
          ['Question', 'Session', 'Team', 'Run', 'Asked', 'Deadline', 'Last step sent'],
          list.map((t) => [
            t.title,
            sessionLink(t.kasmId),
            t.team,
            h('code', { class: 'run' }, t.run),
            time(t.openedAt),
            t.deadline === null ? '—' : time(t.deadline),
            t.step === 0 ? 'first notice' : `step ${t.step}`,
          ]),
        ),
    list.length < report.all.questions.timeouts
      ? h(
          'p',
          { class: 'muted' },
          `The latest ${list.length} of ${report.all.questions.timeouts}; the CSV has them all.`,
        )
      : null,
  )
}

function handoffsSection(report: Report): HTMLElement {
  const list = report.handoffs
  return h(
    'section',
    { 'aria-labelledby': 'handoffs-title' },
    h('h2', { id: 'handoffs-title' }, 'Handoffs'),
    list.length === 0
      ? h('p', { class: 'muted' }, 'No handoff ended in this period.')
      : table(
          'Handoffs and their waits',
          ['Reason', 'Session', 'Team', 'Started', 'Waited', 'Ended'],
          list.map((x) => [
            x.reason,
            sessionLink(x.kasmId),
            x.team,
            time(x.openedAt),
            duration(x.waitS),
            x.endedBy === 'operator' && x.name !== null
              ? `${x.name} finished it`
              : (ENDED_BY[x.endedBy] ?? x.endedBy),
          ]),
        ),
  )
}

/** The whole report under its controls; `destroy` stops what follows the page's width. */
export function reportView(report: Report): { el: HTMLElement; destroy(): void } {
  const people = report.all.people
  const observers: ResizeObserver[] = []
  const el = h(
    'div',
    { class: 'report' },
    headline(report.all),
    outcomesSection(report.all.questions, outcomesOf([report.all.questions])),
    chartSection(report, observers),
    report.teams.length > 1
      ? h(
          'section',
          { 'aria-labelledby': 'teams-title' },
          h('h2', { id: 'teams-title' }, 'By team'),
          teamsTable(report.teams),
        )
      : null,
    h(
      'section',
      { 'aria-labelledby': 'people-title' },
      h('h2', { id: 'people-title' }, 'By person'),
      people.length === 0
        ? h(
            'p',
            { class: 'muted' },
            'Nobody answered a question or finished a handoff through the gateway in this period.',
          )
        : peopleTable(people),
    ),
    stepsSection(report),
    timeoutsSection(report),
    handoffsSection(report),
  )
  return {
    el,
    destroy: () => {
      for (const o of observers) o.disconnect()
    },
  }
}
