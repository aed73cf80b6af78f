import { parseEventId } from '../../protocol/events.ts'
import { SummaryFold } from '../../summary/fold.ts'
import type { SessionSummary } from '../../summary/types.ts'
import { kasmViewerUrl, type SessionFocus } from '../links.ts'
import { RunActivity } from './activity.ts'
import { ApiError, api, base, sessionBase } from './api.ts'
import { ClosedLinkNote } from './closed-link.ts'
import { countdown } from './countdown.ts'
import { h, perFrame, replace, setText } from './dom.ts'
import { ago, clock } from './format.ts'
import { InboxView } from './inbox.ts'
import { healthBadge, healthHelp, pauseEndText, stateBadge, verdictNote } from './labels.ts'
import { needs, type OverviewEntry, type OverviewModel } from './overview-model.ts'
import {
  type ActionRecord,
  type InboxState,
  isObject,
  type MessageRecord,
  type RequestRecord,
} from './records.ts'
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

export type Tab = 'home' | 'timeline' | 'inbox'

/** Where a session view opens: a tab the link named (`#inbox`), and what it puts in view (`?request=`). */
export interface Opening {
  readonly tab: Tab | null
  readonly focus: SessionFocus | null
}

/** How long after its questions are known the view still looks for something to open on (a pause's replay). */
const LANDING_MS = 2000

/** The deployment's Kasm origin, from the shell's `<meta>` (see src/console/shell.ts); null when unknown. */
const KASM_ORIGIN = document.querySelector<HTMLMetaElement>('meta[name="krg-kasm-origin"]')?.content || null

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

/** Where a "What you can do" item takes the person. */
type Goal = 'answer' | 'message' | 'stop' | 'finish' | 'timeline'

/**
 * One session, deep-linkable at `<base>sessions/<kasm_id>`: Home, Timeline and Inbox as the bundled sidebar
 * has them, from the session's full `/events` stream (the only event stream the page opens besides the
 * overview). The run's state is folded with the gateway's own summary fold; who else watches, the reader's
 * health and "I'm on it" marks come from the overview. A session that waits for a person opens where the
 * person acts: its soonest open question (or the one a link names) with its first field focused, or its
 * handoff pause with the Kasm viewer's link.
 */
export class SessionView {
  readonly el: HTMLElement
  readonly #kasmId: string
  readonly #path: string
  readonly #model: OverviewModel
  readonly #fold = new SummaryFold()
  readonly #activity: RunActivity
  readonly #timeline: Timeline
  readonly #inbox: InboxView
  readonly #home: HTMLElement
  readonly #banner: HTMLElement
  readonly #linkNote: ClosedLinkNote
  readonly #headState: HTMLElement
  readonly #watchers: HTMLElement
  readonly #tabs = new Map<Tab, { tab: HTMLButtonElement; panel: HTMLElement }>()
  readonly #inboxCount: HTMLElement
  readonly #me: Me
  readonly #off: () => void
  readonly #kasmViewer: string | null
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
  /**
   * Still to put the person where they act, until it is done, the person does something first, or nothing
   * waits: what the link asked for, and when the run's questions were known (null: not yet).
   */
  #landing: { focus: SessionFocus | null; knownAt: number | null } | null

  constructor(kasmId: string, model: OverviewModel, me: Me, opening: Opening = { tab: null, focus: null }) {
    this.#kasmId = kasmId
    this.#path = sessionBase(kasmId)
    this.#model = model
    this.#me = me
    this.#kasmViewer = kasmViewerUrl(KASM_ORIGIN, kasmId)
    const who = me.name ?? me.sub
    this.#activity = new RunActivity(kasmId, () => {
      this.#inbox.peopleChanged()
      this.#timeline.sendersChanged()
      this.#revision = -1
      this.#schedule()
    })
    this.#timeline = new Timeline(kasmId, this.#activity)
    this.#inbox = new InboxView({
      kasmId,
      sessionPath: this.#path,
      canWrite: canWrite(me),
      me: who,
      activity: this.#activity,
      kasmViewer: this.#kasmViewer,
    })
    this.#home = h('div', { class: 'home' }, h('p', { class: 'muted' }, 'Loading the session…'))
    this.#banner = h('div', { class: 'banner', role: 'status', hidden: true })
    this.#linkNote = new ClosedLinkNote(kasmId, () =>
      this.el.querySelector<HTMLElement>('[role="tab"][aria-selected="true"]')?.focus(),
    )
    this.#headState = h('p', { class: 'session-state' })
    this.#watchers = h('p', { class: 'watchers' })
    this.#inboxCount = h('span', { class: 'count-badge', hidden: true })
    const tablist = h('div', {
      class: 'tabs',
      role: 'tablist',
      'aria-label': 'Session views',
    })
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
      this.#linkNote.el,
      tablist,
      panels,
    )
    // What the overview knows already decides the first tab; the questions themselves come with the run.
    const known = model.entries.get(kasmId)
    const waiting = known !== undefined && needs(known) > 0
    const nothingWaits = model.ready && known !== undefined && !waiting
    // A link that names a tab (`#timeline`) opens there; one that names nothing opens where a person acts.
    this.#landing =
      opening.tab !== null || (nothingWaits && opening.focus === null)
        ? null
        : { focus: opening.focus, knownAt: null }
    this.select(opening.tab ?? (opening.focus !== null || waiting ? 'inbox' : 'home'), false)
    // The person doing anything first (a click, a key) is where they want to be.
    const interacted = (): void => {
      this.#landing = null
    }
    this.el.addEventListener('pointerdown', interacted)
    this.el.addEventListener('keydown', interacted)
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
    this.#activity.stop()
    this.#timeline.destroy()
    if (this.#closedPoll !== null) window.clearInterval(this.#closedPoll)
  }

  /** Shows a tab; `focus` moves the keyboard focus to it (a click or arrow key). */
  select(tab: Tab, focus: boolean): void {
    for (const [name, { tab: button, panel }] of this.#tabs) {
      const on = name === tab
      button.setAttribute('aria-selected', String(on))
      panel.hidden = !on
    }
    this.#timeline.shown(tab === 'timeline')
    if (focus) this.#tabs.get(tab)?.tab.focus()
  }

  /**
   * Arrow keys, Home and End move between the tabs (the WAI-ARIA tabs pattern); every tab is also in the Tab
   * order, so a person who does not know the pattern reaches each one with Tab.
   */
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
    // The fold has not seen the new run yet: its snapshot is how the previous one ended.
    this.#inbox.startRun(run, this.#fold.snapshot())
    this.#activity.startRun(run)
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
      if (this.#landing !== null && this.#landing.knownAt === null) {
        this.#landing.knownAt = performance.now()
        // Once more after the wait, so a landing with nothing to land on ends.
        window.setTimeout(() => this.#schedule(), LANDING_MS + 50)
      }
      this.#schedule()
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) this.#showGone()
    }
  }

  /** The inbox state again (a stop names the tool call it waits for there). */
  async #refreshInbox(run: string): Promise<void> {
    const inbox = await api<InboxState>(`${this.#path}inbox`).catch(() => null)
    if (inbox === null || this.#run !== run || inbox.run !== run) return
    this.#inboxState = inbox
    this.#schedule()
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
    else if (type === 'action' && isObject(body)) this.#action(parsed.run, body as unknown as ActionRecord)
    this.#schedule()
  }

  #action(run: string, action: ActionRecord): void {
    this.#inbox.setAction(action)
    if (action.action !== 'stop') return
    if (action.state === 'accepted') void this.#refreshInbox(run)
    else if (action.state === 'stopped' && this.#inboxState !== null)
      this.#inboxState = { ...this.#inboxState, stopping: false }
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
    this.#inbox.setEscalations(entry?.escalations ?? {})
    this.#inbox.setHandoffSteps(entry?.handoffSteps ?? null)
    this.#inbox.setState(summary, this.#inboxState)
    const open = summary.openRequests.length
    this.#inboxCount.hidden = open === 0
    replace(
      this.#inboxCount,
      open === 0 ? '' : ` ${open}`,
      h('span', { class: 'sr-only' }, ` open question${open === 1 ? '' : 's'}`),
    )
    this.#land(summary)
    if (this.#fold.revision === this.#revision && entry?.health === this.#health) return
    this.#revision = this.#fold.revision
    this.#health = entry?.health
    const handedBackBy = this.#inbox.handedBackBy()
    replace(
      this.#headState,
      entry === undefined ? null : healthBadge(entry.health),
      ' ',
      stateBadge(summary, handedBackBy),
      summary.app ? h('span', { class: 'app' }, summary.app) : null,
    )
    this.#renderHome(summary, entry, handedBackBy)
  }

  /**
   * Puts the person where they act, once: the question a link names while it is open, else the question
   * (or the pause) the session waits on. A link's question that is not open (closed, of another run, or no
   * question at all) says so, and what became of it, rather than opening another in its place.
   */
  #land(s: SessionSummary): void {
    const landing = this.#landing
    // Once every question of the run is in (the GET after the replay): the soonest is then the soonest, and
    // no card arriving later pushes the one in view away.
    if (landing === null || landing.knownAt === null || this.#gone || this.#run === null) return
    if (landing.focus !== null && 'request' in landing.focus) {
      const link = landing.focus
      this.#landing = null
      this.select('inbox', false)
      // A link names its run: the same id in a later run is another question.
      const question =
        link.run === undefined || link.run === this.#run ? this.#inbox.question(link.request) : undefined
      if (question?.request.state === 'open') {
        question.focusFirst()
        return
      }
      const open = s.openRequests.length
      void this.#linkNote.show(link, this.#run, question?.request ?? null, {
        closed: question === undefined ? null : () => question.focusResult(),
        open: open === 0 ? null : () => this.#inbox.soonestOpen()?.focusFirst(),
        openCount: open,
      })
      return
    }
    const question = this.#inbox.soonestOpen()
    if (question !== undefined) {
      this.#landing = null
      this.select('inbox', false)
      question.focusFirst()
      return
    }
    if (s.escalation !== null) {
      this.#landing = null
      this.select('inbox', false)
      this.#inbox.focusHandoff()
      return
    }
    if (performance.now() - landing.knownAt > LANDING_MS) this.#landing = null
  }

  /** Goes to where a "What you can do" item is done. */
  #goTo(goal: Goal): void {
    this.#landing = null
    if (goal === 'timeline') {
      this.select('timeline', true)
      return
    }
    this.select('inbox', false)
    if (goal === 'answer') this.#inbox.soonestOpen()?.focusFirst()
    else if (goal === 'message') this.#inbox.focusCompose()
    else if (goal === 'stop') this.#inbox.focusStop()
    else this.#inbox.focusFinish()
  }

  #renderHome(s: SessionSummary, entry: OverviewEntry | undefined, handedBackBy: string | undefined): void {
    const row = (term: string, ...value: (Node | string | null)[]) => [
      h('dt', {}, term),
      h('dd', {}, ...value),
    ]
    const go = (goal: Goal, label: string, note?: string) =>
      h(
        'li',
        {},
        h(
          'button',
          { type: 'button', class: 'link', 'data-goal': goal, onclick: () => this.#goTo(goal) },
          label,
        ),
        note === undefined ? null : ` ${note}`,
      )
    const can: HTMLElement[] = []
    if (canWrite(this.#me)) {
      const open = s.openRequests.length
      if (open > 0)
        can.push(go('answer', open === 1 ? 'Answer its open question' : `Answer its ${open} open questions`))
      if (s.escalation !== null)
        can.push(
          h(
            'li',
            {},
            this.#kasmViewer === null
              ? 'Take over in the Kasm viewer, '
              : h(
                  'a',
                  { href: this.#kasmViewer, target: '_blank', rel: 'noopener', 'data-goal': 'viewer' },
                  'Take over in the Kasm viewer',
                ),
            this.#kasmViewer === null ? '' : ', ',
            'then ',
            h(
              'button',
              { type: 'button', class: 'link', 'data-goal': 'finish', onclick: () => this.#goTo('finish') },
              'press “I’m done, finish”',
            ),
            '.',
          ),
        )
      if (s.loop === 'running' && s.ended === null)
        can.push(go('stop', 'Stop the agent’s loop', '(it finishes its current tool call first).'))
      can.push(go('message', 'Send the run a message', '(with attachments) from the Inbox.'))
    } else
      can.push(go('timeline', 'Follow the run in the Timeline', ': your role does not allow writing to it.'))
    const last = s.lastEscalation
    const lastText =
      last === null
        ? null
        : `${last.reason}, ${
            last.endedBy === 'operator'
              ? `handed back by ${handedBackBy ?? 'a person'} (“I’m done, finish”)`
              : pauseEndText(last.endedBy)
          }${last.pausedS === null ? '' : ` after ${Math.round(last.pausedS)} s`}`
    const note = verdictNote(s)
    // A redraw keeps the keyboard where it was.
    const focused = (document.activeElement as HTMLElement | null)?.closest?.('.home [data-goal]')
    const goal = focused instanceof HTMLElement ? focused.dataset.goal : undefined
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
        ...row(
          'State',
          stateBadge(s, handedBackBy),
          s.conclusion ? ` · ${s.conclusion}` : '',
          note === null ? null : h('span', { class: 'verdict-note' }, note),
        ),
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
        ...(lastText === null ? [] : row('Last handoff', lastText)),
      ),
      h('h2', {}, 'What you can do'),
      h('ul', { class: 'can' }, ...can),
    )
    if (goal !== undefined) this.#home.querySelector<HTMLElement>(`[data-goal="${goal}"]`)?.focus()
  }
}
