import type { RunActivity } from './activity.ts'
import { h, perFrame, setText } from './dom.ts'
import { timeOf, withTimes } from './format.ts'
import { closedByText, pauseEndText, verdictTone } from './labels.ts'
import { artifactUrl } from './overview-view.ts'
import { isObject } from './records.ts'

type Json = Record<string, unknown>

const clip = (value: unknown, max = 240): string => {
  const s =
    typeof value === 'string' ? value : value === undefined || value === null ? '' : JSON.stringify(value)
  return s.length > max ? `${s.slice(0, max - 1)}…` : s
}

/** What a runtime wrote, clipped, with the instants in it in the person's own time (see withTimes). */
const said = (value: unknown, max?: number): (Node | string)[] => withTimes(clip(value, max))

/** How close to the end of the list counts as reading the newest events (they are followed as they come). */
const FOLLOW_PX = 80

/**
 * The run as it happens: steps with their results, screenshots (a lazy thumbnail, full size on demand),
 * model calls, log lines by level, questions, actions and the escalation record, with runs separated and
 * their verdicts (a run's verdict stays in its separator after the next run starts). Items are appended in
 * one batch per animation frame: a replay of thousands of events costs a few appends, never a re-render.
 *
 * The list scrolls itself, under the session's header and tabs, which stay where they are: opening a run of
 * thousands of events never carries the page away from them. It opens at the newest event and follows new
 * ones while the person is there; scrolled back, it stays where they read (items are laid out as they come,
 * at their real size, so nothing above moves) and offers "Jump to latest". End (in the list) reaches the
 * newest item.
 */
export class Timeline {
  readonly el: HTMLElement
  readonly #list: HTMLOListElement
  readonly #count: HTMLElement
  readonly #kasmId: string
  readonly #people: Pick<RunActivity, 'sender'>
  readonly #dialog: HTMLDialogElement
  readonly #dialogImg: HTMLImageElement
  readonly #dialogCaption: HTMLElement
  readonly #jump: HTMLButtonElement
  readonly #onScroll = (): void => this.#scrolled()
  #pending: DocumentFragment = document.createDocumentFragment()
  #items = 0
  #runVerdict: HTMLElement | null = null
  #lastSeq = 0
  #shown = false
  /** The person reads the newest events: new ones keep the page at the end. */
  #following = true

  constructor(kasmId: string, people: Pick<RunActivity, 'sender'>) {
    this.#kasmId = kasmId
    this.#people = people
    // In the Tab order: the keyboard scrolls it (arrows, Page Down, End).
    this.#list = h('ol', { class: 'timeline', 'aria-label': 'Timeline', tabindex: '0' })
    this.#count = h('p', { class: 'muted timeline-count' }, 'Nothing has happened yet.')
    this.#jump = h(
      'button',
      { type: 'button', class: 'jump-latest', hidden: true, onclick: () => this.jumpToLatest(true) },
      'Jump to latest',
    )
    this.#dialogImg = h('img', { alt: '' })
    this.#dialogCaption = h('p', {})
    this.#dialog = h(
      'dialog',
      { class: 'shot-dialog', 'aria-label': 'Screenshot' },
      h('form', { method: 'dialog' }, h('button', { type: 'submit', class: 'secondary' }, 'Close')),
      this.#dialogCaption,
      this.#dialogImg,
    )
    this.el = h('div', { class: 'timeline-wrap' }, this.#count, this.#list, this.#jump, this.#dialog)
    this.#list.addEventListener('scroll', this.#onScroll, { passive: true })
  }

  /** Who sent each message is known now (the audit log answered): the message rows say it. */
  sendersChanged(): void {
    for (const el of this.#list.querySelectorAll<HTMLElement>('.sender')) this.#fillSender(el)
    for (const el of this.#pending.querySelectorAll<HTMLElement>('.sender')) this.#fillSender(el)
  }

  #fillSender(el: HTMLElement): void {
    const key = el.dataset.key
    const who =
      el.dataset.orchestrator !== undefined
        ? 'the orchestrator'
        : key === undefined
          ? null
          : this.#people.sender(key)
    setText(
      el,
      who === undefined
        ? '…'
        : who === null
          ? 'someone outside the gateway'
          : typeof who === 'string'
            ? who
            : who.name,
    )
  }

  /** The view left the page. */
  destroy(): void {
    this.#list.removeEventListener('scroll', this.#onScroll)
  }

  /** The Timeline tab was shown (or hidden): it opens at the newest event. */
  shown(on: boolean): void {
    const was = this.#shown
    this.#shown = on
    if (on && !was) this.jumpToLatest(false)
    if (!on) this.#jump.hidden = true
  }

  /** Scrolls to the newest item and follows new ones again; `focus` puts the keyboard on it too. */
  jumpToLatest(focus: boolean): void {
    this.#following = true
    this.#flushNow()
    const last = this.#list.lastElementChild as HTMLElement | null
    if (last === null || !this.#list.isConnected) return
    this.#toEnd()
    if (focus) {
      last.tabIndex = -1
      last.focus({ preventScroll: true })
    }
    this.#jump.hidden = true
  }

  /** Scrolls the list (never the page) to its newest item. */
  #toEnd(): void {
    this.#list.scrollTop = this.#list.scrollHeight
  }

  /** How far the end of the list is below what it shows. */
  #distance(): number {
    return this.#list.scrollHeight - (this.#list.clientHeight + this.#list.scrollTop)
  }

  #scrolled(): void {
    if (!this.#shown) return
    this.#following = this.#distance() <= FOLLOW_PX
    this.#jump.hidden = this.#following || this.#items === 0
  }

  /** Items shown (tests and the count line). */
  get size(): number {
    return this.#items
  }

  /** A new run starts: a separator that will carry its verdict. */
  startRun(run: string): void {
    this.#runVerdict = h('span', { class: 'run-verdict' }, 'running')
    this.#lastSeq = 0
    this.#push(h('li', { class: 'run-start' }, h('h2', {}, 'Run ', h('code', {}, run)), this.#runVerdict))
  }

  /** The run closed its trace without `done`. */
  closed(): void {
    if (this.#runVerdict !== null) setText(this.#runVerdict, 'closed without a verdict')
    this.#push(h('li', { class: 'item muted' }, 'The run closed its trace without a done event.'))
  }

  /** One event of the stream (`data` parsed, or null when it was not JSON). */
  add(seq: number, type: string, data: Json | null): void {
    if (this.#lastSeq > 0 && seq > this.#lastSeq + 1) {
      const missing = seq - this.#lastSeq - 1
      this.#push(
        h(
          'li',
          { class: 'item gap' },
          `${missing} earlier event${missing === 1 ? ' is' : 's are'} no longer buffered (see the run’s trace.jsonl).`,
        ),
      )
    }
    this.#lastSeq = Math.max(this.#lastSeq, seq)
    const item = this.#item(type, data)
    if (item !== null) this.#push(item)
  }

  #item(type: string, data: Json | null): HTMLLIElement | null {
    const p = data === null ? null : (data[type === 'delivery' ? 'message' : type] as unknown)
    const at = typeof data?.ts === 'string' ? timeOf(data.ts, 'at') : null
    const li = (cls: string, ...children: (Node | string | null)[]) =>
      h('li', { class: `item ${cls}` }, at, ...children)
    const o: Json = isObject(p) ? p : {}
    switch (type) {
      case 'info':
        return li(
          'info',
          h('span', { class: 'kind' }, 'Run'),
          [o.app, o.version].filter(Boolean).join(' '),
          ...(o.goal ? [' · goal: ', ...said(o.goal)] : []),
        )
      case 'status': {
        if (o.phase === 'done') {
          const verdict = [o.verdict, o.outcome && o.outcome !== o.verdict ? `(${o.outcome})` : null]
            .filter(Boolean)
            .join(' ')
          if (this.#runVerdict !== null) {
            setText(this.#runVerdict, verdict || 'done')
            this.#runVerdict.className = `run-verdict badge tone-${verdictTone(String(o.verdict ?? ''), String(o.outcome ?? ''))}`
          }
          return li(
            'status done',
            h('span', { class: 'kind' }, 'Verdict'),
            verdict || 'done',
            ...(o.summary ? [' · ', ...said(o.summary, 400)] : []),
          )
        }
        return li(
          'status',
          h('span', { class: 'kind' }, 'Phase'),
          clip(o.phase, 40),
          ...(o.detail ? [' · ', ...said(o.detail)] : []),
        )
      }
      case 'iteration': {
        const tools = Array.isArray(o.tool_calls)
          ? o.tool_calls.map((c) => (isObject(c) ? String(c.name) : '?')).join(', ')
          : ''
        return li(
          'iteration',
          h('span', { class: 'kind' }, `Model call ${clip(o.n, 10)}`),
          tools ? `→ ${tools}` : '',
          o.content ? h('p', { class: 'detail' }, ...said(o.content, 300)) : null,
        )
      }
      case 'step':
        return li(
          'step',
          h('span', { class: 'kind' }, `Step ${clip(o.n, 10)}`),
          h('code', {}, clip(o.action, 160)),
          o.result !== undefined ? h('span', { class: 'result' }, ' → ', ...said(o.result, 300)) : null,
          typeof o.duration_ms === 'number' ? h('span', { class: 'muted' }, ` · ${o.duration_ms} ms`) : null,
        )
      case 'screenshot':
        return this.#shot(o, at)
      case 'log':
        return li(
          `log log-${['info', 'warn', 'error'].includes(String(o.level)) ? String(o.level) : 'other'}`,
          h('span', { class: 'kind' }, clip(o.level, 10) || 'log'),
          ...said(o.msg, 500),
        )
      case 'escalation': {
        const after = typeof o.paused_s === 'number' ? ` after ${Math.round(o.paused_s)} s` : ''
        const how =
          o.ended_by === 'operator'
            ? 'handed back by a person (“I’m done, finish”)'
            : `the pause ${pauseEndText(o.ended_by)}`
        return li(
          'escalation',
          h('span', { class: 'kind' }, 'Handoff'),
          `${how}${after}`,
          ...(o.reason ? [': ', ...said(o.reason)] : []),
        )
      }
      case 'request':
        return li(
          'request',
          h('span', { class: 'kind' }, `Question ${clip(o.request_id, 40)}`),
          ...(o.state === 'open'
            ? ['asked: ', ...said(o.title)]
            : [closedByText(typeof o.closed_by === 'string' ? o.closed_by : undefined)]),
        )
      case 'message': {
        const sender = h('span', { class: 'sender' })
        if (typeof o.key === 'string') sender.dataset.key = o.key
        if (o.sender === 'orchestrator') sender.dataset.orchestrator = ''
        this.#fillSender(sender)
        return li(
          'message',
          h('span', { class: 'kind' }, `Message ${clip(o.id, 40)}`),
          o.reply_to ? `answer to ${clip(o.reply_to, 40)} from ` : 'from ',
          sender,
        )
      }
      case 'action':
        return li(
          'action',
          h('span', { class: 'kind' }, 'Action'),
          `${clip(o.action, 40)} ${clip(o.state, 20)}${o.found ? ` (found ${clip(o.found, 20)})` : ''}`,
        )
      case 'compact':
        return li('muted', 'The agent compacted its context.')
      case 'transfer':
        return li(
          'transfer',
          h('span', { class: 'kind' }, 'Transfer'),
          `${clip(o.action, 40)} ${o.ok === false ? 'failed' : 'ok'}`,
        )
      case 'done':
        return li('done', 'The run is done.')
      case 'delivery':
      case 'input':
        // Delivery states live in the inbox; input events would drown the timeline.
        return null
      default:
        return li('other', h('span', { class: 'kind' }, clip(type, 40)), 'event')
    }
  }

  #shot(o: Json, at: HTMLElement | null): HTMLLIElement | null {
    if (typeof o.file !== 'string' || !/^(?!.*(?:^|\/)\.)[A-Za-z0-9._/-]{1,200}$/.test(o.file)) return null
    const url = artifactUrl(this.#kasmId, o.file)
    const label = `Screenshot${typeof o.step === 'number' ? ` after step ${o.step}` : ''}${o.label ? `: ${clip(o.label, 120)}` : ''}`
    const open = (): void => {
      this.#dialogImg.src = url
      this.#dialogImg.alt = label
      setText(this.#dialogCaption, label)
      this.#dialog.showModal()
    }
    return h(
      'li',
      { class: 'item screenshot' },
      at,
      h(
        'button',
        { type: 'button', class: 'shot', onclick: open, 'aria-label': `${label}: open full size` },
        h('img', { src: url, alt: '', loading: 'lazy', decoding: 'async', width: 160, height: 100 }),
      ),
      h('span', { class: 'shot-label' }, label),
    )
  }

  #push(li: HTMLElement): void {
    this.#pending.appendChild(li)
    this.#items++
    this.#scheduleFlush()
  }

  readonly #scheduleFlush = perFrame(() => this.#flush())

  /** Appends what came since the last frame at once (a jump needs every item laid out). */
  #flushNow(): void {
    if (this.#pending.childNodes.length === 0) return
    this.#list.appendChild(this.#pending)
    this.#pending = document.createDocumentFragment()
    setText(this.#count, `${this.#items} item${this.#items === 1 ? '' : 's'}`)
  }

  #flush(): void {
    this.#flushNow()
    if (!this.#shown || !this.#list.isConnected) return
    // Following the newest: stay at the end. Reading back: nothing moves (items only ever go below).
    if (this.#following) this.#toEnd()
    else this.#jump.hidden = false
  }
}
