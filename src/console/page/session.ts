import { parseEventId } from '../../protocol/events.ts'
import { SummaryFold } from '../../summary/fold.ts'
import type { SessionSummary } from '../../summary/types.ts'
import { ApiError, api, base, sessionBase } from './api.ts'
import { h, perFrame, replace, setText } from './dom.ts'
import { ago, clock } from './format.ts'
import { InboxView } from './inbox.ts'
import { healthBadge, healthHelp, runState, verdictTone } from './labels.ts'
import type { OverviewEntry, OverviewModel } from './overview-model.ts'
import { countdown } from './overview-view.ts'
import { type InboxState, isObject, type MessageRecord, type RequestRecord } from './records.ts'
import { type EventStream, openEventStream } from './sse.ts'
import { Timeline } from './timeline.ts'

/** Who is looking, as `auth/me` says. */
export interface Me {
  readonly sub: string
  readonly name?: string
  readonly roles: readonly string[]
  readonly teams: readonly string[]
}

export function canWrite(me: Me): boolean {
  return me.roles.includes('operator') || me.roles.includes('admin')
}

type Tab = 'home' | 'timeline' | 'inbox'

/** An event as read from the stream, waiting for its slice. */
interface QueuedEvent {
  readonly id: string | undefined
  readonly type: string
  readonly data: string
}

/** How long one slice of event handling may run before the page gets the main thread back. */
const SLICE_MS = 8
const TABS: readonly [Tab, string][] = [
  ['home', 'Home'],
  ['timeline', 'Timeline'],
  ['inbox', 'Inbox'],
]

/**
 * One session, deep-linkable at `<base>sessions/<kasm_id>`: Home, Timeline and Inbox as the bundled sidebar
 * has them, from the session's full `/events` stream (the only event stream the page opens besides the
 * overview). The run's state is folded with the gateway's own summary fold; who else watches, the reader's
 * health and "I'm on it" marks come from the overview.
 */
export class SessionView {
  readonly el: HTMLElement
  readonly #kasmId: string
  readonly #path: string
  readonly #model: OverviewModel
  readonly #fold = new SummaryFold()
  readonly #timeline: Timeline
  readonly #inbox: InboxView
  readonly #home: HTMLElement
  readonly #banner: HTMLElement
  readonly #headState: HTMLElement
  readonly #watchers: HTMLElement
  readonly #tabs = new Map<Tab, { tab: HTMLButtonElement; panel: HTMLElement }>()
  readonly #inboxCount: HTMLElement
  readonly #me: Me
  readonly #off: () => void
  #stream: EventStream | null = null
  #run: string | null = null
  #lastId: string | null = null
  #inboxState: InboxState | null = null
  #closedPoll: number | null = null
  #gone = false
  #revision = -1
  #queue: QueuedEvent[] = []
  #queueHead = 0
  #draining = false
  /** A message to oneself: the next slice runs as soon as the browser has had its turn (no timer clamping). */
  readonly #yield = new MessageChannel()
  #health: string | undefined

  constructor(kasmId: string, model: OverviewModel, me: Me, initialTab: Tab = 'home') {
    this.#kasmId = kasmId
    this.#path = sessionBase(kasmId)
    this.#model = model
    this.#me = me
    const who = me.name ?? me.sub
    this.#timeline = new Timeline(kasmId)
    this.#inbox = new InboxView({
      kasmId,
      sessionPath: this.#path,
      canWrite: canWrite(me),
      me: who,
      message: (id) => this.#inbox.message(id),
    })
    this.#home = h('div', { class: 'home' }, h('p', { class: 'muted' }, 'Loading the session…'))
    this.#banner = h('div', { class: 'banner', role: 'status', hidden: true })
    this.#headState = h('p', { class: 'session-state' })
    this.#watchers = h('p', { class: 'watchers' })
    this.#inboxCount = h('span', { class: 'count-badge', hidden: true })
    const tablist = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Session views' })
    const panels = h('div', { class: 'panels' })
    for (const [tab, label] of TABS) {
      const button = h(
        'button',
        {
          type: 'button',
          role: 'tab',
          id: `tab-${tab}`,
          'aria-controls': `panel-${tab}`,
          onclick: () => this.select(tab, true),
        },
        label,
        tab === 'inbox' ? this.#inboxCount : null,
      )
      const content = tab === 'home' ? this.#home : tab === 'timeline' ? this.#timeline.el : this.#inbox.el
      const panel = h(
        'section',
        { role: 'tabpanel', id: `panel-${tab}`, 'aria-labelledby': `tab-${tab}`, tabindex: '0' },
        content,
      )
      tablist.append(button)
      panels.append(panel)
      this.#tabs.set(tab, { tab: button, panel })
    }
    tablist.addEventListener('keydown', (e) => this.#tabKeys(e))
    this.el = h(
      'section',
      { class: 'session', 'aria-labelledby': 'session-title' },
      h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: base }, '← All sessions')),
      h('h1', { id: 'session-title', tabindex: '-1' }, kasmId),
      this.#headState,
      this.#watchers,
      this.#banner,
      tablist,
      panels,
    )
    this.select(initialTab, false)
    this.#yield.port1.onmessage = () => this.#drain()
    this.#off = model.subscribe((change) => {
      if (change.kind === 'entry' && change.entry.kasmId === kasmId) this.#schedule()
      if (change.kind === 'gone' && change.kasmId === kasmId) this.#showGone()
    })
    this.#open()
    this.#schedule()
  }

  /** Closes the session's event stream (the view left the page). */
  destroy(): void {
    this.#off()
    this.#yield.port1.close()
    this.#stream?.close()
    if (this.#closedPoll !== null) window.clearInterval(this.#closedPoll)
  }

  /** Shows a tab; `focus` moves the keyboard focus to it (a click or arrow key). */
  select(tab: Tab, focus: boolean): void {
    for (const [name, { tab: button, panel }] of this.#tabs) {
      const on = name === tab
      button.setAttribute('aria-selected', String(on))
      button.tabIndex = on ? 0 : -1
      panel.hidden = !on
    }
    if (focus) this.#tabs.get(tab)?.tab.focus()
  }

  #tabKeys(e: KeyboardEvent): void {
    const order = TABS.map(([t]) => t)
    const current = order.findIndex((t) => this.#tabs.get(t)?.tab === document.activeElement)
    if (current < 0) return
    let next: number | null = null
    if (e.key === 'ArrowRight') next = (current + 1) % order.length
    else if (e.key === 'ArrowLeft') next = (current - 1 + order.length) % order.length
    else if (e.key === 'Home') next = 0
    else if (e.key === 'End') next = order.length - 1
    if (next === null) return
    e.preventDefault()
    this.select(order[next] as Tab, true)
  }

  #open(): void {
    this.#stream = openEventStream(
      `${this.#path}events`,
      {
        open: () => this.#notice(null),
        event: (e) => this.#enqueue(e.id, e.event ?? 'message', e.data),
        comment: (c) => {
          const m = /^ ?run (\S+)$/.exec(c)
          if (m?.[1] !== undefined) this.#runSeen(m[1])
        },
        trouble: (status, code, live) => this.#trouble(status, code, live),
      },
      () => this.#lastId,
    )
  }

  #trouble(status: number, code: string | null, live: boolean): boolean {
    if (status === 404) {
      this.#showGone()
      return false
    }
    if (status === 403) {
      this.#notice('Your role does not allow reading this session.')
      return false
    }
    if (code === 'upstream_token_refused')
      this.#notice('The runtime refused the gateway’s token: an administrator must rotate it. Retrying…')
    else if (status === 502 || status === 504)
      this.#notice('The session runtime is not reachable yet. Retrying…')
    else if (status === 429)
      this.#notice('You have too many streams open; close other console tabs. Retrying…')
    else if (live) this.#notice('The event stream dropped. Reconnecting…')
    else this.#notice('The gateway cannot be reached. Retrying…')
    return true
  }

  #notice(message: string | null): void {
    this.#banner.hidden = message === null
    setText(this.#banner, message ?? '')
  }

  #showGone(): void {
    if (this.#gone) return
    this.#gone = true
    this.#stream?.close()
    replace(
      this.el,
      h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: base }, '← All sessions')),
      h('h1', { id: 'session-title', tabindex: '-1' }, 'Session not found'),
      h(
        'p',
        {},
        `There is no session “${this.#kasmId}” that you may see. It may have ended and been removed, or belong to another team.`,
      ),
    )
  }

  /** A run id from an event id or a `: run` comment: a different one starts everything over. */
  #runSeen(run: string): void {
    if (run === this.#run) return
    this.#run = run
    this.#inboxState = null
    if (this.#closedPoll !== null) window.clearInterval(this.#closedPoll)
    this.#closedPoll = null
    this.#timeline.startRun(run)
    this.#inbox.startRun(run)
    void this.#reconcile(run)
  }

  /**
   * What the stream's buffer may no longer hold: the inbox state (run, stopping), every message of the run
   * and its open questions, merged by id with what events bring (never added twice).
   */
  async #reconcile(run: string): Promise<void> {
    try {
      const [inbox, messages, requests] = await Promise.all([
        api<InboxState>(`${this.#path}inbox`),
        api<{ run: string; messages: MessageRecord[] }>(`${this.#path}messages`),
        api<{ run: string; requests: RequestRecord[] }>(`${this.#path}requests`),
      ])
      if (this.#run !== run) return
      this.#inboxState = inbox
      if (messages.run === run) for (const m of messages.messages) this.#inbox.setMessage(m)
      if (requests.run === run) for (const r of requests.requests) this.#inbox.setRequest(r)
      this.#schedule()
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) this.#showGone()
    }
  }

  /**
   * Events are handled in slices of a few milliseconds, yielding to the browser in between: a replay of
   * thousands (one network read) never blocks the page for longer than a frame.
   */
  #enqueue(id: string | undefined, type: string, data: string): void {
    this.#queue.push({ id, type, data })
    if (this.#draining) return
    this.#draining = true
    this.#yield.port2.postMessage(null)
  }

  #drain(): void {
    const started = performance.now()
    let i = this.#queueHead
    while (i < this.#queue.length && performance.now() - started < SLICE_MS) {
      const e = this.#queue[i++] as QueuedEvent
      if (!this.#gone) this.#event(e.id, e.type, e.data)
    }
    if (i < this.#queue.length) {
      this.#queueHead = i
      this.#yield.port2.postMessage(null)
      return
    }
    this.#queue = []
    this.#queueHead = 0
    this.#draining = false
  }

  #event(id: string | undefined, type: string, data: string): void {
    if (type === 'closed') {
      if (this.#run !== null) this.#fold.apply({ kind: 'closed', run: this.#run })
      this.#timeline.closed()
      this.#waitForNewRun()
      this.#schedule()
      return
    }
    const parsed = id === undefined ? null : parseEventId(id)
    if (parsed === null) return
    this.#runSeen(parsed.run)
    this.#lastId = id ?? null
    this.#fold.apply({ kind: 'event', run: parsed.run, seq: parsed.seq, type, data })
    let payload: Record<string, unknown> | null = null
    try {
      const value: unknown = JSON.parse(data)
      payload = isObject(value) ? value : null
    } catch {
      payload = null
    }
    this.#timeline.add(parsed.seq, type, payload)
    const body = payload?.[type === 'delivery' ? 'message' : type]
    if ((type === 'message' || type === 'delivery') && isObject(body))
      this.#inbox.setMessage(body as unknown as MessageRecord)
    else if (type === 'request' && isObject(body)) this.#inbox.setRequest(body as unknown as RequestRecord)
    else if (
      type === 'action' &&
      isObject(body) &&
      body.action === 'stop' &&
      body.state === 'stopped' &&
      this.#inboxState !== null
    )
      this.#inboxState = { ...this.#inboxState, stopping: false }
    this.#schedule()
  }

  /** After `closed`, the stream ends: ask every few seconds whether a new run has started, then read it. */
  #waitForNewRun(): void {
    if (this.#closedPoll !== null) return
    const closedRun = this.#run
    this.#closedPoll = window.setInterval(() => {
      api<InboxState>(`${this.#path}inbox`).then(
        (inbox) => {
          if (inbox.run === closedRun || this.#closedPoll === null) return
          window.clearInterval(this.#closedPoll)
          this.#closedPoll = null
          this.#lastId = null
          this.#stream?.reconnect()
        },
        () => {},
      )
    }, 5000)
  }

  readonly #schedule = perFrame(() => this.#render())

  #render(): void {
    if (this.#gone) return
    const summary = this.#fold.snapshot()
    const entry = this.#model.entries.get(this.#kasmId)
    const others = (entry?.watchers ?? []).filter((n) => n !== (this.#me.name ?? this.#me.sub))
    setText(
      this.#watchers,
      others.length === 0 ? 'Nobody else has this session open.' : `Also watching: ${others.join(', ')}`,
    )
    this.#inbox.setClaims(entry?.claims ?? {})
    this.#inbox.setState(summary, this.#inboxState)
    const open = summary.openRequests.length
    this.#inboxCount.hidden = open === 0
    replace(
      this.#inboxCount,
      open === 0 ? '' : ` ${open}`,
      h('span', { class: 'sr-only' }, ` open question${open === 1 ? '' : 's'}`),
    )
    if (this.#fold.revision === this.#revision && entry?.health === this.#health) return
    this.#revision = this.#fold.revision
    this.#health = entry?.health
    replace(
      this.#headState,
      entry === undefined ? null : healthBadge(entry.health),
      ' ',
      h(
        'span',
        { class: `badge tone-${summary.ended ? verdictTone(summary.verdict, summary.outcome) : 'neutral'}` },
        runState(summary),
      ),
      summary.app ? ` · ${summary.app}` : '',
    )
    this.#renderHome(summary, entry)
  }

  #renderHome(s: SessionSummary, entry: OverviewEntry | undefined): void {
    const row = (term: string, ...value: (Node | string | null)[]) => [
      h('dt', {}, term),
      h('dd', {}, ...value),
    ]
    const can: string[] = []
    if (canWrite(this.#me)) {
      can.push('Send the run a message (with attachments) from the Inbox.')
      if (s.openRequests.length > 0)
        can.push(
          `Answer ${s.openRequests.length === 1 ? 'its open question' : `its ${s.openRequests.length} open questions`}.`,
        )
      if (s.loop === 'running') can.push('Stop the agent’s loop (it finishes its current tool call first).')
      if (s.escalation !== null) can.push('Take over in the Kasm viewer, then press “I’m done, finish”.')
    } else can.push('Read the run: your role does not allow writing to it.')
    replace(
      this.#home,
      h(
        'dl',
        { class: 'facts' },
        ...row(
          'Goal',
          s.goal ?? (s.mode === 'mcp' ? 'An MCP session: an outside agent drives it.' : 'Not reported yet'),
        ),
        ...row('App', [s.app].filter(Boolean).join(' ') || 'Not reported yet'),
        ...row('Run', s.run === null ? 'none yet' : h('code', {}, s.run)),
        ...row('State', runState(s), s.conclusion ? ` · ${s.conclusion}` : ''),
        ...row(
          'Agent loop',
          { none: 'none', running: 'running', stopping: 'stopping…', exited: 'exited' }[s.loop],
        ),
        ...row(
          'Runtime',
          entry === undefined ? 'unknown' : healthBadge(entry.health),
          entry === undefined ? '' : ` ${healthHelp(entry.health)}`,
        ),
        ...row('Last activity', ago(s.lastActivity)),
        ...(s.escalation === null
          ? []
          : row(
              'Handoff',
              s.escalation.reason,
              ' · since ',
              clock(s.escalation.startedAt),
              s.escalation.endsAt === null ? null : h('span', {}, ' · ', countdown(s.escalation.endsAt)),
            )),
        ...(s.lastEscalation === null
          ? []
          : row(
              'Last handoff',
              `${s.lastEscalation.reason}, ended by ${s.lastEscalation.endedBy}${s.lastEscalation.pausedS === null ? '' : ` after ${Math.round(s.lastEscalation.pausedS)} s`}`,
            )),
      ),
      h('h2', {}, 'What you can do'),
      h('ul', {}, ...can.map((c) => h('li', {}, c))),
    )
  }
}
