import type { SessionSummary } from '../../summary/types.ts'
import { ApiError, newKey, post, upload } from './api.ts'
import { announce, h, replace, setText } from './dom.ts'
import { bytes, clock } from './format.ts'
import { deliveryText } from './labels.ts'
import { countdown } from './overview-view.ts'
import { errorText, type QuestionContext, QuestionView } from './questions.ts'
import type { InboxState, MessageRecord, RequestRecord, UploadedAttachment } from './records.ts'

/** A message shown in the inbox: the runtime's record, or one being sent (keyed by its idempotency key). */
interface Shown {
  readonly li: HTMLLIElement
  readonly state: HTMLElement
  record: MessageRecord
}

/**
 * The inbox of the session on screen: every message with its live delivery state, the compose box (Attach,
 * Ctrl/Cmd+Enter to send), Stop while the agent's loop runs ("Stopping…" until it has exited), "I'm done,
 * finish" during a handoff pause, and the run's questions. A viewer sees no write control at all. Messages,
 * questions and controls are keyed and updated in place (a refresh never adds a second copy).
 */
export class InboxView {
  readonly el: HTMLElement
  readonly #ctx: QuestionContext
  readonly #questions = new Map<string, QuestionView>()
  readonly #messages = new Map<string, Shown>()
  readonly #byKey = new Map<string, Shown>()
  readonly #openList: HTMLElement
  readonly #closedList: HTMLElement
  readonly #messageList: HTMLOListElement
  readonly #noMessage: HTMLElement
  readonly #controls: HTMLElement
  readonly #controlStatus: HTMLElement
  readonly #stop: HTMLButtonElement
  readonly #finish: HTMLButtonElement
  readonly #handoff: HTMLElement
  readonly #compose: HTMLFormElement | null = null
  readonly #text: HTMLTextAreaElement | null = null
  readonly #send: HTMLButtonElement | null = null
  readonly #chips: HTMLElement | null = null
  readonly #composeStatus: HTMLElement | null = null
  readonly #attached: UploadedAttachment[] = []
  #uploading = 0
  #run: string | null = null
  #stopping = false
  #finishing = false
  #pendingKey: { content: string; key: string } | null = null
  #claims: Readonly<Record<string, { name: string }>> = {}

  constructor(ctx: QuestionContext) {
    this.#ctx = ctx
    this.#openList = h('div', { class: 'questions' })
    this.#closedList = h('div', { class: 'questions closed' })
    this.#messageList = h('ol', { class: 'messages', 'aria-label': 'Messages' })
    this.#noMessage = h('p', { class: 'muted' }, 'No message in this run yet.')
    this.#controlStatus = h('p', { class: 'form-status', role: 'status' })
    this.#stop = h(
      'button',
      { type: 'button', class: 'danger', hidden: true, onclick: () => void this.#action('stop') },
      'Stop the agent',
    )
    this.#finish = h(
      'button',
      { type: 'button', hidden: true, onclick: () => void this.#action('finish_handoff') },
      'I’m done, finish',
    )
    this.#handoff = h('p', { class: 'handoff-note', hidden: true })
    this.#controls = h(
      'div',
      { class: 'controls' },
      this.#handoff,
      h('div', { class: 'actions' }, this.#stop, this.#finish),
      this.#controlStatus,
    )
    const first: (HTMLElement | null)[] = [
      h('h2', { id: 'inbox-questions' }, 'Questions'),
      this.#openList,
      ctx.canWrite
        ? this.#controls
        : h('p', { class: 'muted read-only' }, 'Your role can read this session but not write to it.'),
    ]
    const parts: (HTMLElement | null)[] = []
    if (ctx.canWrite) {
      const file = h('input', { type: 'file', id: 'compose-file', hidden: true })
      file.addEventListener('change', () => {
        const chosen = file.files?.[0]
        file.value = ''
        if (chosen !== undefined) void this.#attach(chosen)
      })
      this.#text = h('textarea', { id: 'compose-text', rows: 3, 'aria-describedby': 'compose-hint' })
      this.#text.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
          e.preventDefault()
          void this.#sendMessage()
        }
      })
      this.#send = h('button', { type: 'submit' }, 'Send')
      this.#chips = h('ul', { class: 'chips', 'aria-label': 'Attachments to send' })
      this.#composeStatus = h('p', { class: 'form-status', role: 'status' })
      this.#compose = h(
        'form',
        { class: 'compose', 'aria-labelledby': 'compose-title' },
        h('h2', { id: 'compose-title' }, 'Message the run'),
        h('label', { for: 'compose-text' }, 'Message'),
        this.#text,
        h(
          'p',
          { id: 'compose-hint', class: 'hint' },
          'Ctrl+Enter (⌘+Enter on a Mac) sends. The agent reads it before its next model call.',
        ),
        this.#chips,
        h(
          'div',
          { class: 'actions' },
          h('button', { type: 'button', class: 'secondary', onclick: () => file.click() }, 'Attach…'),
          file,
          this.#send,
        ),
        this.#composeStatus,
      )
      this.#compose.addEventListener('submit', (e) => {
        e.preventDefault()
        void this.#sendMessage()
      })
      parts.push(this.#compose)
    }
    parts.push(h('h2', {}, 'Messages'), this.#noMessage, this.#messageList)
    first.push(h('h2', {}, 'Earlier questions'), this.#closedList)
    // Two columns on a wide screen: what waits for a person, and the conversation.
    this.el = h(
      'div',
      { class: 'inbox' },
      h('div', { class: 'inbox-col' }, ...first),
      h('div', { class: 'inbox-col' }, ...parts),
    )
  }

  /** A new run: what the old one held is gone (its messages and questions stay in its own report). */
  startRun(run: string): void {
    this.#run = run
    this.#stopping = false
    this.#finishing = false
    this.#pendingKey = null
    for (const q of this.#questions.values()) q.el.remove()
    this.#questions.clear()
    this.#messages.clear()
    this.#byKey.clear()
    replace(this.#messageList)
    this.#noMessage.hidden = false
    this.#emptyNotes()
  }

  /** The message a question's answer came in, if the page has it. */
  message(id: string): MessageRecord | undefined {
    return this.#messages.get(id)?.record
  }

  /** A question, new or changed. */
  setRequest(request: RequestRecord): void {
    if (request.run !== this.#run) return
    let view = this.#questions.get(request.request_id)
    if (view === undefined) {
      view = new QuestionView(request, this.#ctx)
      this.#questions.set(request.request_id, view)
      view.setHolder(this.#claims[request.request_id]?.name ?? null)
    } else view.update(request)
    if (request.state === 'closed') {
      // The latest closed first.
      if (view.el.parentElement !== this.#closedList) this.#closedList.prepend(view.el)
    } else if (view.el.parentElement !== this.#openList) {
      // Open ones soonest deadline first, as the overview sorts them.
      const deadline = request.deadline ?? '9999'
      view.el.dataset.deadline = deadline
      const later = [...this.#openList.querySelectorAll<HTMLElement>(':scope > .question')].find(
        (el) => (el.dataset.deadline ?? '9999') > deadline,
      )
      this.#openList.insertBefore(view.el, later ?? null)
    }
    this.#emptyNotes()
  }

  /** "I'm on it" marks of the current run, from the overview. */
  setClaims(claims: Readonly<Record<string, { name: string }>>): void {
    this.#claims = claims
    for (const [id, view] of this.#questions) view.setHolder(claims[id]?.name ?? null)
  }

  /** A message, new or at a later state (message and delivery events, GETs). */
  setMessage(record: MessageRecord): void {
    if (record.run !== this.#run) return
    const known =
      this.#messages.get(record.id) ?? (record.key === undefined ? undefined : this.#byKey.get(record.key))
    if (known !== undefined) {
      // A record never goes back: an older copy (a GET that raced an event) is ignored.
      if ((known.record.rev ?? 0) > (record.rev ?? 0) && known.record.id === record.id) return
      known.record = record
      this.#messages.set(record.id, known)
      this.#fill(known)
      return
    }
    const shown = this.#shown(record)
    this.#messages.set(record.id, shown)
    if (record.key !== undefined) this.#byKey.set(record.key, shown)
    this.#messageList.append(shown.li)
    this.#noMessage.hidden = true
  }

  /** The controls for the run's state: Stop while its loop runs, finish during a handoff pause. */
  setState(summary: SessionSummary, inbox: InboxState | null): void {
    if (summary.loop !== 'stopping' && summary.loop !== 'running') this.#stopping = false
    const stopping = this.#stopping || summary.loop === 'stopping' || inbox?.stopping === true
    const running = summary.loop === 'running' && summary.ended === null && inbox?.closed !== true
    this.#stop.hidden = !(running || stopping)
    this.#stop.disabled = stopping
    setText(this.#stop, stopping ? 'Stopping…' : 'Stop the agent')
    if (stopping) this.#stop.setAttribute('aria-busy', 'true')
    else this.#stop.removeAttribute('aria-busy')
    const pause = summary.escalation
    if (pause === null) this.#finishing = false
    this.#finish.hidden = pause === null
    this.#finish.disabled = this.#finishing
    setText(this.#finish, this.#finishing ? 'Finishing…' : 'I’m done, finish')
    this.#handoff.hidden = pause === null
    if (pause !== null) {
      replace(
        this.#handoff,
        h('strong', {}, 'Handoff: '),
        `the agent handed the session to a person (${pause.reason}). Take over in the Kasm viewer, then press “I’m done, finish”. `,
        pause.endsAt === null
          ? 'The pause lasts until the run’s deadline.'
          : countdown(pause.endsAt, 'The pause ends by itself in '),
      )
    }
    if (this.#send !== null) this.#send.disabled = this.#run === null || this.#uploading > 0
    // Nothing to control (no loop, no pause) and nothing to say: no empty box.
    this.#controls.hidden = this.#stop.hidden && this.#finish.hidden && this.#controlStatus.textContent === ''
  }

  #emptyNotes(): void {
    if (this.#openList.querySelector('.question') === null && this.#openList.querySelector('.empty') === null)
      this.#openList.append(h('p', { class: 'empty muted' }, 'No open question.'))
    if (this.#openList.querySelector('.question') !== null) this.#openList.querySelector('.empty')?.remove()
  }

  #shown(record: MessageRecord): Shown {
    const shown: Shown = { li: h('li', { class: 'message' }), state: h('span', { class: 'state' }), record }
    this.#fill(shown)
    return shown
  }

  #fill(shown: Shown): void {
    const m = shown.record
    const who =
      m.sender === 'operator'
        ? 'Operator (through the gateway)'
        : m.sender === 'orchestrator'
          ? 'Orchestrator'
          : 'You'
    shown.state.className = `state badge state-${m.state}`
    setText(shown.state, deliveryText(m.state, m.undelivered_reason))
    replace(
      shown.li,
      h(
        'p',
        { class: 'message-head' },
        h('span', { class: 'who' }, m.reply_to ? `Answer to ${m.reply_to}` : who),
        m.received_at ? ` · ${clock(m.received_at)}` : '',
        ' ',
        shown.state,
      ),
      m.text ? h('p', { class: 'message-text' }, m.text) : null,
      m.values
        ? h(
            'p',
            { class: 'message-text' },
            Object.entries(m.values)
              .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(', ') : String(v)}`)
              .join(' · '),
          )
        : null,
      m.attachments && m.attachments.length > 0
        ? h(
            'p',
            { class: 'message-files' },
            ...m.attachments.map((id) =>
              h(
                'a',
                { href: `${this.#ctx.sessionPath}attachments/${encodeURIComponent(id)}`, download: '' },
                `attachment ${id}`,
              ),
            ),
          )
        : null,
      m.detail ? h('p', { class: 'muted' }, m.detail) : null,
    )
  }

  async #attach(file: File): Promise<void> {
    if (this.#chips === null || this.#composeStatus === null) return
    this.#uploading++
    const chip = h('li', { class: 'chip', 'aria-busy': 'true' }, `Uploading ${file.name}…`)
    this.#chips.append(chip)
    if (this.#send !== null) this.#send.disabled = true
    try {
      const a = await upload<UploadedAttachment>(this.#ctx.sessionPath, file)
      this.#attached.push(a)
      chip.removeAttribute('aria-busy')
      replace(
        chip,
        `${a.name} (${bytes(a.size)})`,
        h(
          'button',
          {
            type: 'button',
            class: 'link',
            'aria-label': `Remove ${a.name}`,
            onclick: () => {
              this.#attached.splice(this.#attached.indexOf(a), 1)
              chip.remove()
              this.#text?.focus()
            },
          },
          'Remove',
        ),
      )
      this.#say(this.#composeStatus, `${a.name} attached.`, false)
    } catch (err) {
      chip.remove()
      this.#say(
        this.#composeStatus,
        err instanceof ApiError && err.status === 413
          ? `${file.name} is larger than the session accepts.`
          : `Not attached: ${errorText(err)}`,
        true,
      )
    } finally {
      this.#uploading--
      if (this.#send !== null) this.#send.disabled = this.#uploading > 0 || this.#run === null
    }
  }

  async #sendMessage(): Promise<void> {
    const text = this.#text
    const status = this.#composeStatus
    const send = this.#send
    if (text === null || status === null || send === null || send.disabled) return
    const run = this.#run
    const body = text.value.trim()
    const attachments = this.#attached.map((a) => a.id)
    if (run === null) return
    if (body === '' && attachments.length === 0) {
      this.#say(status, 'Write a message or attach a file first.', true)
      text.focus()
      return
    }
    const content = JSON.stringify({ run, body, attachments })
    // The same content keeps its key, so a retry after a lost answer is not stored twice.
    if (this.#pendingKey?.content !== content) this.#pendingKey = { content, key: newKey() }
    const key = this.#pendingKey.key
    const local: MessageRecord = { id: `local:${key}`, run, key, text: body, attachments, state: 'sending' }
    this.setMessage(local)
    send.disabled = true
    send.setAttribute('aria-busy', 'true')
    setText(send, 'Sending…')
    try {
      const record = await post<MessageRecord>(`${this.#ctx.sessionPath}messages`, {
        run,
        key,
        ...(body === '' ? {} : { text: body }),
        ...(attachments.length === 0 ? {} : { attachments }),
      })
      this.#pendingKey = null
      this.setMessage(record)
      text.value = ''
      this.#attached.length = 0
      if (this.#chips !== null) replace(this.#chips)
      this.#say(status, 'Sent. Its delivery state follows in the list below.', false)
    } catch (err) {
      const shown = this.#byKey.get(key)
      if (shown !== undefined && shown.record.id === local.id) {
        shown.record = { ...local, state: 'failed' }
        this.#fill(shown)
      }
      const moved =
        err instanceof ApiError &&
        err.status === 409 &&
        typeof err.body?.run === 'string' &&
        err.body.run !== run
      this.#say(
        status,
        moved
          ? 'Not sent: the session has moved on to a new run. Send it again to reach the new run.'
          : `Not sent: ${errorText(err)}`,
        true,
      )
    } finally {
      send.removeAttribute('aria-busy')
      setText(send, 'Send')
      send.disabled = this.#uploading > 0
      text.focus()
    }
  }

  async #action(action: 'stop' | 'finish_handoff'): Promise<void> {
    const run = this.#run
    if (run === null) return
    const button = action === 'stop' ? this.#stop : this.#finish
    button.disabled = true
    button.setAttribute('aria-busy', 'true')
    if (action === 'stop') {
      this.#stopping = true
      setText(button, 'Stopping…')
    } else {
      this.#finishing = true
      setText(button, 'Finishing…')
    }
    try {
      await post(`${this.#ctx.sessionPath}actions`, { run, key: newKey(), action })
      this.#say(
        this.#controlStatus,
        action === 'stop'
          ? 'Stop accepted: the agent stops once its current tool call ends.'
          : 'Handoff finished.',
        false,
      )
    } catch (err) {
      if (action === 'stop') this.#stopping = false
      else this.#finishing = false
      button.disabled = false
      button.removeAttribute('aria-busy')
      setText(button, action === 'stop' ? 'Stop the agent' : 'I’m done, finish')
      const found =
        err instanceof ApiError && typeof err.body?.state === 'string'
          ? ` (the run is ${err.body.state})`
          : ''
      this.#say(this.#controlStatus, `Refused: ${errorText(err)}${found}`, true)
    }
  }

  #say(target: HTMLElement, message: string, refusal: boolean): void {
    if (target === this.#controlStatus) this.#controls.hidden = false
    target.classList.toggle('refused', refusal)
    setText(target, message)
    if (refusal) announce(message)
  }
}
