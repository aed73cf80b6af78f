import { type SessionFocus, sessionPath } from '../links.ts'
import { base, sessionBase } from './api.ts'
import { countdown } from './countdown.ts'
import { h, perFrame, replace, setText } from './dom.ts'
import { ago } from './format.ts'
import { healthBadge, runState, stateBadge } from './labels.ts'
import {
  compareEntries,
  endedInError,
  needs,
  type OverviewChange,
  type OverviewEntry,
  type OverviewModel,
} from './overview-model.ts'

/** The artifact URL of a run file (each path segment encoded; the gateway serves it with the cookie). */
export function artifactUrl(kasmId: string, file: string): string {
  return `${sessionBase(kasmId)}artifacts/${file.split('/').map(encodeURIComponent).join('/')}`
}

/** One row: built once per session, updated in place. */
interface Row {
  readonly li: HTMLLIElement
  entry: OverviewEntry
  /** The JSON of what the row shows, to skip unchanged updates. */
  shown: string
}

/**
 * The overview: every session the person may see, one row each, those needing a person first, filtered by
 * team and text. Rows are keyed by session and changed in place; the list is reordered only when the order
 * changes, so a busy session costs one row's update, not a re-render.
 */
export class OverviewView {
  readonly el: HTMLElement
  readonly #model: OverviewModel
  readonly #rows = new Map<string, Row>()
  readonly #list: HTMLUListElement
  readonly #count: HTMLElement
  readonly #empty: HTMLElement
  readonly #search: HTMLInputElement
  readonly #team: HTMLSelectElement
  readonly #off: () => void
  #firstRowMarked = false

  constructor(model: OverviewModel) {
    this.#model = model
    this.#search = h('input', {
      type: 'search',
      id: 'filter-text',
      autocomplete: 'off',
      placeholder: 'Session, app, goal, question…',
    })
    this.#team = h('select', { id: 'filter-team' }, h('option', { value: '' }, 'All teams'))
    this.#search.addEventListener('input', () => this.#schedule())
    this.#team.addEventListener('change', () => this.#schedule())
    this.#list = h('ul', { class: 'sessions', 'aria-label': 'Sessions' })
    this.#count = h('p', { class: 'count', role: 'status' }, 'Loading sessions…')
    this.#empty = h('p', { class: 'empty', hidden: true })
    this.el = h(
      'section',
      { class: 'overview', 'aria-labelledby': 'overview-title' },
      h('h1', { id: 'overview-title', tabindex: '-1' }, 'Sessions'),
      h(
        'form',
        { class: 'filters', role: 'search', onsubmit: (e: Event) => e.preventDefault() },
        // Each label stays with its control when the row wraps (a phone).
        h(
          'span',
          { class: 'filter filter-text' },
          h('label', { for: 'filter-text' }, 'Filter'),
          this.#search,
        ),
        h('span', { class: 'filter filter-team' }, h('label', { for: 'filter-team' }, 'Team'), this.#team),
      ),
      this.#count,
      this.#empty,
      this.#list,
    )
    for (const entry of model.entries.values()) this.#upsert(entry)
    this.#off = model.subscribe((change) => this.#changed(change))
    this.#render()
  }

  /** Stops listening (the view left the page). */
  destroy(): void {
    this.#off()
  }

  #changed(change: OverviewChange): void {
    if (change.kind === 'entry') this.#upsert(change.entry)
    else if (change.kind === 'gone') {
      this.#rows.get(change.kasmId)?.li.remove()
      this.#rows.delete(change.kasmId)
    }
    this.#schedule()
  }

  readonly #schedule = perFrame(() => this.#render())

  #upsert(entry: OverviewEntry): void {
    let row = this.#rows.get(entry.kasmId)
    if (row === undefined) {
      row = { li: h('li', { class: 'session-row' }), entry, shown: '' }
      this.#rows.set(entry.kasmId, row)
    }
    row.entry = entry
    const shown = JSON.stringify(entry)
    if (shown === row.shown) return
    row.shown = shown
    fillRow(row.li, entry)
  }

  #render(): void {
    const text = this.#search.value.trim().toLowerCase()
    const team = this.#team.value
    this.#syncTeams()
    const all = [...this.#rows.values()].sort((a, b) => compareEntries(a.entry, b.entry))
    const visible = all.filter((r) => (team === '' || r.entry.team === team) && matches(r.entry, text))
    // Reorder only what moved: appending an element already in place still costs a layout.
    const shown = new Set(visible.map((r) => r.li))
    for (const r of all) if (!shown.has(r.li) && r.li.isConnected) r.li.remove()
    let at: ChildNode | null = this.#list.firstChild
    for (const r of visible) {
      if (at === r.li) {
        at = at.nextSibling
        continue
      }
      this.#list.insertBefore(r.li, at)
    }
    const needing = all.filter((r) => needs(r.entry) > 0).length
    if (!this.#model.ready && all.length === 0) setText(this.#count, 'Loading sessions…')
    else
      setText(
        this.#count,
        `${visible.length} of ${all.length} session${all.length === 1 ? '' : 's'}${needing > 0 ? ` · ${needing} need${needing === 1 ? 's' : ''} a person` : ''}`,
      )
    this.#empty.hidden = !(this.#model.ready && visible.length === 0)
    setText(
      this.#empty,
      all.length === 0
        ? 'No sessions yet. Sessions appear here as soon as they are registered with the gateway.'
        : 'No session matches the filter.',
    )
    if (!this.#firstRowMarked && visible.length > 0) {
      this.#firstRowMarked = true
      // What the load benchmark measures: navigation start to the first row on screen.
      performance.mark('krg:first-overview-row')
    }
  }

  #syncTeams(): void {
    const teams = [...new Set([...this.#rows.values()].map((r) => r.entry.team))].sort()
    const have = [...this.#team.options].slice(1).map((o) => o.value)
    if (teams.join('\n') === have.join('\n')) return
    const chosen = this.#team.value
    replace(
      this.#team,
      h('option', { value: '' }, 'All teams'),
      ...teams.map((t) => h('option', { value: t }, t)),
    )
    this.#team.value = teams.includes(chosen) ? chosen : ''
  }
}

function matches(entry: OverviewEntry, text: string): boolean {
  if (text === '') return true
  const s = entry.summary
  const hay = [
    entry.kasmId,
    entry.team,
    s?.app,
    s?.goal,
    s?.phase,
    s?.verdict,
    ...entry.watchers,
    ...(s?.openRequests.map((r) => r.title) ?? []),
  ]
  return hay.some((v) => typeof v === 'string' && v.toLowerCase().includes(text))
}

/**
 * What a row's link puts in view: the soonest question (of its run), else the handoff pause
 * (src/console/links.ts).
 */
export function focusFor(s: OverviewEntry['summary']): SessionFocus | null {
  const first = s?.openRequests[0]
  if (s === null || first === undefined) return s?.escalation ? { handoff: true } : null
  return s.run === null ? { request: first.requestId } : { request: first.requestId, run: s.run }
}

function fillRow(li: HTMLLIElement, entry: OverviewEntry): void {
  const s = entry.summary
  const attention: (HTMLElement | string)[] = []
  const first = s?.openRequests[0]
  if (s !== null && first !== undefined) {
    const claim = entry.claims[first.requestId]
    // How far its escalation went: the highest step sent beyond the first notice.
    const sent = (entry.escalations?.[first.requestId]?.steps ?? []).filter((x) => x.state === 'sent')
    const step = Math.max(0, ...sent.map((x) => x.step))
    // The time left is in the state badge ("Waiting for an answer · 1:23 left").
    attention.push(
      h(
        'span',
        { class: 'need need-question' },
        h('strong', {}, s.openRequests.length === 1 ? 'Question: ' : `${s.openRequests.length} questions: `),
        first.title,
        claim === undefined ? null : h('span', { class: 'row-claim' }, ` · ${claim.name} is on it`),
        step === 0 ? null : h('span', { class: 'row-step' }, ` · escalated (step ${step})`),
      ),
    )
  }
  if (s?.escalation) {
    attention.push(
      h(
        'span',
        { class: 'need need-handoff' },
        h('strong', {}, 'Handoff: '),
        s.escalation.reason,
        s.escalation.endsAt === null
          ? null
          : h('span', { class: 'deadline' }, ' · ', countdown(s.escalation.endsAt)),
      ),
    )
  }
  if (s !== null && endedInError(s))
    attention.push(h('span', { class: 'need need-error' }, h('strong', {}, 'Ended: '), runState(s)))
  li.className = `session-row${needs(entry) > 0 ? ' needs-person' : ''}`
  replace(
    li,
    h(
      'a',
      { class: 'row-link', href: sessionPath(base, entry.kasmId, focusFor(s)) },
      s?.screenshot
        ? h('img', {
            class: 'thumb',
            src: artifactUrl(entry.kasmId, s.screenshot.file),
            alt: '',
            width: 96,
            height: 60,
            loading: 'lazy',
            decoding: 'async',
          })
        : h('span', { class: 'thumb thumb-empty', 'aria-hidden': 'true' }),
      h(
        'span',
        { class: 'row-main' },
        h(
          'span',
          { class: 'row-title' },
          h('strong', { class: 'kasm-id' }, entry.kasmId),
          h('span', { class: 'team' }, entry.team),
          s?.app ? h('span', { class: 'app' }, s.app) : null,
        ),
        h('span', { class: 'goal' }, s?.goal ?? (s?.mode === 'mcp' ? 'MCP session' : 'No goal reported yet')),
        h(
          'span',
          { class: 'row-state' },
          healthBadge(entry.health),
          stateBadge(s),
          h('span', { class: 'activity' }, ago(s?.lastActivity ?? null)),
        ),
        attention.length > 0 ? h('span', { class: 'row-attention' }, ...attention) : null,
        entry.watchers.length > 0
          ? h('span', { class: 'watchers' }, `Watching: ${entry.watchers.join(', ')}`)
          : null,
      ),
    ),
  )
}
