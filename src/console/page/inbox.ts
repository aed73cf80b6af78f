import type { EscalationView } from '../../overview/escalations.ts'
import type { SessionSummary } from '../../summary/types.ts'
import type { RunActivity } from './activity.ts'
import { ApiError, newKey, post, upload } from './api.ts'
import { AttachmentNames } from './attachments.ts'
import { Confirm } from './confirm.ts'
import { countdown } from './countdown.ts'
import { announce, h, replace, setText } from './dom.ts'
import { renderEscalation } from './escalation.ts'
import { bytes, clock } from './format.ts'
import { deliveryText, pauseEndText, runState } from './labels.ts'
import { labelledValues, QuestionView } from './questions.ts'
import type { ActionRecord, InboxState, MessageRecord, RequestRecord, UploadedAttachment } from './records.ts'
import { errorText, notSentText } from './refusals.ts'

/** A message shown in the inbox: the runtime's record, or one being sent (keyed by its idempotency key). */
interface Shown {
  readonly li: HTMLLIElement
  readonly state: HTMLElement
  record: MessageRecord
}

/** What the inbox of a session needs to know. */
export interface InboxOptions {
  readonly kasmId: string
  /** `/desktop/<kasm_id>/mcp/` */
  readonly sessionPath: string
  readonly canWrite: boolean
  /** The person's display name. */
  readonly me: string
  /** Who did what through the gateway (senders, who stopped or handed back). */
  readonly activity: RunActivity
  /** The session in the Kasm viewer, where a person takes over during a handoff; null when unknown. */
  readonly kasmViewer: string | null
}

/**
 * The inbox of the session on screen: every message with who sent it and its live delivery state, the
 * compose box (Attach, Ctrl/Cmd+Enter to send), Stop while the agent's loop runs (confirmed first, then
 * "Stopping…" until the loop has exited, then who stopped it), "I'm done, finish" during a handoff pause
 * with the Kasm viewer's link (confirmed first too), and the run's questions. A viewer sees no write control at all. Messages,
 * questions and controls are keyed and updated in place (a refresh never adds a second copy); every status
 * comes from the run's events, so it is the same for everyone who watches.
 */
export class InboxView {
  readonly el: HTMLElement
  readonly #o: InboxOptions
  readonly #files: AttachmentNames
  readonly #questions = new Map<string, QuestionView>()
  readonly #messages = new Map<string, Shown>()
  readonly #byKey = new Map<string, Shown>()
  /** Keys of the messages and actions this page sent: whose they are at once, before the audit log says. */
  readonly #ownKeys = new Set<string>()
  readonly #openList: HTMLElement
  readonly #closedList: HTMLElement
  readonly #closedTitle: HTMLElement
  readonly #messageList: HTMLOListElement
  readonly #noMessage: HTMLElement
  readonly #controls: HTMLElement
  readonly #controlStatus: HTMLElement
  readonly #stop: HTMLButtonElement
  readonly #confirmStop: Confirm
  readonly #finish: HTMLButtonElement
  readonly #confirmFinish: Confirm
  readonly #handoff: HTMLElement
  /** The handoff pause's escalation steps, and what they were last drawn from. */
  readonly #handoffSteps: HTMLElement
  #handoffStepsView: EscalationView | null = null
  #handoffStepsDrawn = ''
  /** What the previous run's controls said at its end (stopped, handed back), until the person dismisses it. */
  readonly #previous: HTMLElement
  /** The pause the handoff note shows (reason and end), so a render that changes nothing leaves it be. */
  #handoffShown: string | null = null
  readonly #viewerLink: HTMLAnchorElement | null
  readonly #text: HTMLTextAreaElement | null = null
  readonly #send: HTMLButtonElement | null = null
  readonly #chips: HTMLElement | null = null
  readonly #composeStatus: HTMLElement | null = null
  readonly #attached: UploadedAttachment[] = []
  #uploading = 0
  #run: string | null = null
  /** Stop was pressed and confirmed here; the run's action event has not said so yet. */
  #stopSent = false
  #finishing = false
  /** The run's stop and finish_handoff actions it accepted, as its events report them (anyone's). */
  #stopAction: ActionRecord | null = null
  #finishAction: ActionRecord | null = null
  /** A refusal to show at the controls until the next attempt. */
  #refusal: string | null = null
  #summary: SessionSummary | null = null
  #inbox: InboxState | null = null
  #pendingKey: { content: string; key: string } | null = null
  #claims: Readonly<Record<string, { name: string }>> = {}
  #escalations: Readonly<Record<string, EscalationView>> = {}

  constructor(options: InboxOptions) {
    this.#o = options
    this.#files = new AttachmentNames(options.sessionPath, () => this.#refill())
    this.#openList = h('div', { class: 'questions' })
    this.#closedList = h('div', { class: 'questions closed' })
    this.#closedTitle = h('h2', { hidden: true }, 'Earlier questions')
    this.#messageList = h('ol', { class: 'messages', 'aria-label': 'Messages' })
    this.#noMessage = h('p', { class: 'muted' }, 'No message in this run yet.')
    this.#controlStatus = h('p', { class: 'form-status', role: 'status', tabindex: '-1' })
    this.#stop = h(
      'button',
      { type: 'button', class: 'danger', hidden: true, onclick: () => this.#ask(this.#confirmStop) },
      'Stop the agent',
    )
    this.#confirmStop = new Confirm({
      question: 'Stop the agent?',
      detail:
        'It makes no further model request: the tool call in flight finishes, then its loop exits and the run ends with its verdict. This cannot be undone.',
      keep: 'Keep it running',
      go: 'Yes, stop the agent',
      danger: true,
      onGo: () => void this.#action('stop'),
      onKeep: () => this.#keep(this.#confirmStop, this.#stop),
    })
    this.#finish = h(
      'button',
      { type: 'button', hidden: true, onclick: () => this.#ask(this.#confirmFinish) },
      'I’m done, finish',
    )
    this.#confirmFinish = new Confirm({
      question: 'Finish the handoff?',
      detail:
        'The pause ends now and the run finishes with the verdict fixed at the handoff: the agent does not resume. Press it once you are done in the Kasm viewer. This cannot be undone.',
      keep: 'Not yet',
      go: 'Yes, finish',
      onGo: () => void this.#action('finish_handoff'),
      onKeep: () => this.#keep(this.#confirmFinish, this.#finish),
    })
    this.#viewerLink =
      options.kasmViewer === null
        ? null
        : h(
            'a',
            { href: options.kasmViewer, target: '_blank', rel: 'noopener', class: 'viewer-link' },
            'Open the session in the Kasm viewer',
          )
    this.#handoff = h('p', { class: 'handoff-note', hidden: true })
    this.#handoffSteps = h('div', { class: 'q-steps handoff-steps', hidden: true })
    this.#previous = h('div', { class: 'previous-run', hidden: true })
    this.#controls = h(
      'div',
      { class: 'controls' },
      this.#previous,
      this.#handoff,
      this.#handoffSteps,
      h('div', { class: 'actions' }, this.#stop, this.#finish),
      this.#confirmStop.el,
      this.#confirmFinish.el,
      this.#controlStatus,
    )
    const first: (HTMLElement | null)[] = [
      h('h2', { id: 'inbox-questions' }, 'Questions'),
      this.#openList,
      options.canWrite
        ? this.#controls
        : h('p', { class: 'muted read-only' }, 'Your role can read this session but not write to it.'),
    ]
    const parts: (HTMLElement | null)[] = []
    if (options.canWrite) {
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
      const compose = h(
        'form',
        { class: 'compose', 'aria-labelledby': 'compose-title' },
        h('h2', { id: 'compose-title' }, 'Message the run'),
        h('label', { for: 'compose-text' }, 'Message'),
        this.#text,
        h(
          'p',
          { id: 'compose-hint', class: 'hint' },
          // Only where there is a keyboard to press it on (console.css hides it on a phone).
          h('span', { class: 'keys-hint' }, 'Ctrl+Enter (⌘+Enter on a Mac) sends. '),
          'The agent reads it before its next model call.',
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
      compose.addEventListener('submit', (e) => {
        e.preventDefault()
        void this.#sendMessage()
      })
      parts.push(compose)
    }
    parts.push(h('h2', {}, 'Messages'), this.#noMessage, this.#messageList)
    // Two columns on a wide screen: what waits for a person with the earlier questions under it, and the
    // conversation. One column on a narrow one, in this order: the message box comes right after what waits
    // (above every earlier question, which only grow), and the keyboard goes the same way.
    this.el = h(
      'div',
      { class: 'inbox' },
      h('div', { class: 'inbox-col inbox-now' }, ...first),
      h('div', { class: 'inbox-col inbox-talk' }, ...parts),
      h('div', { class: 'inbox-col inbox-earlier' }, this.#closedTitle, this.#closedList),
    )
  }

  /**
   * A new run: what the old one held is gone (its messages and questions stay in its own report), except what
   * its controls said at its end (`ended`: its last state), kept until the person dismisses it.
   */
  startRun(run: string, ended: SessionSummary | null): void {
    this.#showPrevious(this.#run === null || ended === null ? null : this.#outcome(ended))
    this.#run = run
    this.#stopSent = false
    this.#finishing = false
    this.#stopAction = null
    this.#finishAction = null
    this.#refusal = null
    this.#pendingKey = null
    this.#confirmStop.hide()
    this.#confirmFinish.hide()
    for (const q of this.#questions.values()) q.el.remove()
    this.#questions.clear()
    this.#messages.clear()
    this.#byKey.clear()
    replace(this.#messageList)
    this.#noMessage.hidden = false
    this.#emptyNotes()
    this.#renderControls()
  }

  /** The message a question's answer came in, if the page has it. */
  message(id: string): MessageRecord | undefined {
    return this.#messages.get(id)?.record
  }

  /** An attachment's name and size as shown (its id only until they are known). */
  fileName(id: string): string {
    const info = this.#files.get(id)
    if (info === undefined) return 'an attachment (looking up its name…)'
    if (info === null) return 'an attachment'
    return info.size === null ? info.name : `${info.name} (${bytes(info.size)})`
  }

  /** The open question that is due first (the overview's order), if any. */
  soonestOpen(): QuestionView | undefined {
    const first = this.#openList.querySelector<HTMLElement>(':scope > .question')
    return first === null ? undefined : this.#questions.get(first.dataset.request ?? '')
  }

  /** A question of the run by id, open or closed. */
  question(id: string): QuestionView | undefined {
    return this.#questions.get(id)
  }

  /** Puts the keyboard in the compose box. */
  focusCompose(): boolean {
    this.#text?.scrollIntoView({ block: 'center' })
    this.#text?.focus()
    return this.#text !== null
  }

  /** Puts the keyboard on Stop (while it is offered). */
  focusStop(): boolean {
    if (this.#stop.hidden) return false
    this.#stop.scrollIntoView({ block: 'center' })
    this.#stop.focus()
    return true
  }

  /** Puts the keyboard on the handoff: the Kasm viewer's link when known, else "I'm done, finish". */
  focusHandoff(): boolean {
    if (this.#handoff.hidden) return false
    this.#controls.scrollIntoView({ block: 'start' })
    if (this.#viewerLink?.isConnected) this.#viewerLink.focus()
    else if (!this.#finish.hidden) this.#finish.focus()
    else this.#controlStatus.focus()
    return true
  }

  /** Puts the keyboard on "I'm done, finish" (during a pause). */
  focusFinish(): boolean {
    if (this.#finish.hidden) return false
    this.#finish.scrollIntoView({ block: 'center' })
    this.#finish.focus()
    return true
  }

  /** A question, new or changed. */
  setRequest(request: RequestRecord): void {
    if (request.run !== this.#run) return
    let view = this.#questions.get(request.request_id)
    if (view === undefined) {
      view = new QuestionView(request, {
        kasmId: this.#o.kasmId,
        sessionPath: this.#o.sessionPath,
        canWrite: this.#o.canWrite,
        me: this.#o.me,
        message: (id) => this.message(id),
        fileName: (id) => this.fileName(id),
        answered: (v) => this.#answered(v),
      })
      this.#questions.set(request.request_id, view)
      view.setHolder(this.#claims[request.request_id]?.name ?? null)
      view.setEscalation(this.#escalations[request.request_id] ?? null)
      for (const shown of this.#messages.values())
        if (shown.record.reply_to === request.request_id) view.replyChanged(shown.record)
    } else view.update(request)
    if (request.state === 'closed') {
      if (view.el.parentElement !== this.#closedList) {
        // Moving the card drops the keyboard's focus: the person's answer has a result to go to.
        const hadFocus = view.el.contains(document.activeElement)
        // The latest closed first.
        this.#closedList.prepend(view.el)
        if (hadFocus) this.#focusAfterClose(view)
      }
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
    // A reply's line names the question it answers.
    for (const shown of this.#messages.values())
      if (shown.record.reply_to === request.request_id) this.#fill(shown)
  }

  /** After an answer: the next open question if there is one, else the answered card's result. */
  #focusAfterClose(view: QuestionView): void {
    const next = this.soonestOpen()
    if (next !== undefined) next.focusFirst()
    else view.focusResult()
  }

  /** This person's answer was stored; its question may have closed (and moved) already. */
  #answered(view: QuestionView): void {
    const lost = document.activeElement === null || document.activeElement === document.body
    if (view.request.state === 'closed' && lost) this.#focusAfterClose(view)
  }

  /** "I'm on it" marks of the current run, from the overview. */
  setClaims(claims: Readonly<Record<string, { name: string }>>): void {
    this.#claims = claims
    for (const [id, view] of this.#questions) view.setHolder(claims[id]?.name ?? null)
  }

  /** The handoff pause's escalation steps, from the overview (null: none, or no pause). */
  setHandoffSteps(view: EscalationView | null): void {
    this.#handoffStepsView = view
    this.#drawHandoffSteps(this.#summary?.escalation != null)
  }

  #drawHandoffSteps(paused: boolean): void {
    const view = paused ? this.#handoffStepsView : null
    const drawn = JSON.stringify(view)
    if (drawn === this.#handoffStepsDrawn) return
    this.#handoffStepsDrawn = drawn
    renderEscalation(this.#handoffSteps, view, null)
  }

  /** Escalation steps of the current run's open questions, from the overview. */
  setEscalations(escalations: Readonly<Record<string, EscalationView>>): void {
    this.#escalations = escalations
    for (const [id, view] of this.#questions) view.setEscalation(escalations[id] ?? null)
  }

  /** A message, new or at a later state (message and delivery events, GETs). */
  setMessage(record: MessageRecord): void {
    if (record.run !== this.#run) return
    if (record.reply_to !== undefined) this.#questions.get(record.reply_to)?.replyChanged(record)
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

  /** A control action of the run (its `action` events): who stopped it, who handed it back, and when. */
  setAction(record: ActionRecord): void {
    if (record.run !== undefined && record.run !== this.#run) return
    if (record.state === 'refused') return
    if (record.action === 'stop') this.#stopAction = record
    else if (record.action === 'finish_handoff') this.#finishAction = record
    this.#renderControls()
  }

  /** Who took a control action: this page (at once), else the audit log's name, when it says. */
  #actor(record: ActionRecord | null): string | undefined {
    const key = record?.key
    if (key === undefined) return undefined
    if (this.#ownKeys.has(key)) return this.#o.me
    return this.#o.activity.actor(key)?.name ?? undefined
  }

  /** Who pressed "I'm done, finish" in this run, when known. */
  handedBackBy(): string | undefined {
    return this.#actor(this.#finishAction)
  }

  /** Who sent what is known now (the audit log answered): every message line again. */
  peopleChanged(): void {
    this.#refill()
    this.#renderControls()
  }

  /** The controls for the run's state: Stop while its loop runs, finish during a handoff pause. */
  setState(summary: SessionSummary, inbox: InboxState | null): void {
    this.#summary = summary
    this.#inbox = inbox
    this.#renderControls()
    if (this.#send !== null) this.#send.disabled = this.#run === null || this.#uploading > 0
  }

  #renderControls(): void {
    const summary = this.#summary
    const inbox = this.#inbox
    if (summary === null) return
    const loop = summary.loop
    const stopped = this.#stopAction?.state === 'stopped' || (this.#stopAction !== null && loop === 'exited')
    if (loop !== 'stopping' && loop !== 'running') this.#stopSent = false
    const stopping =
      !stopped &&
      (this.#stopSent || loop === 'stopping' || inbox?.stopping === true || this.#stopAction !== null)
    const running = loop === 'running' && summary.ended === null && inbox?.closed !== true
    const confirming = this.#confirmStop.asking
    if (!running || stopping) this.#confirmStop.hide()
    this.#stop.hidden = !(running || stopping) || (this.#confirmStop.asking && !stopping)
    this.#stop.disabled = stopping
    setText(this.#stop, stopping ? 'Stopping…' : 'Stop the agent')
    if (stopping) this.#stop.setAttribute('aria-busy', 'true')
    else this.#stop.removeAttribute('aria-busy')
    // A question that went away under the keyboard (the loop exited meanwhile) hands it back to its trigger.
    if (confirming && !this.#confirmStop.asking && document.activeElement === document.body)
      this.#stop.focus()
    const pause = summary.escalation
    if (pause === null) this.#finishing = false
    const confirmingFinish = this.#confirmFinish.asking
    if (pause === null || this.#finishing) this.#confirmFinish.hide()
    this.#finish.hidden = pause === null || this.#confirmFinish.asking
    this.#finish.disabled = this.#finishing
    setText(this.#finish, this.#finishing ? 'Finishing…' : 'I’m done, finish')
    if (confirmingFinish && !this.#confirmFinish.asking && document.activeElement === document.body)
      this.#controlStatus.focus()
    this.#handoff.hidden = pause === null
    const shown = pause === null ? null : `${pause.reason}\u0000${pause.endsAt}`
    // Rebuilding the note would take the keyboard focus off its viewer link (where a handoff lands).
    if (pause !== null && shown !== this.#handoffShown) {
      replace(
        this.#handoff,
        h('strong', {}, 'Handoff: '),
        `the agent handed the session to a person (${pause.reason}). `,
        ...(this.#viewerLink === null
          ? ['Take over in the Kasm viewer, then press “I’m done, finish”. ']
          : [this.#viewerLink, ', take over there, then press “I’m done, finish”. ']),
        pause.endsAt === null
          ? 'The pause lasts until the run’s deadline.'
          : countdown(pause.endsAt, { prefix: 'The pause ends by itself in ', suffix: '.' }),
      )
    }
    this.#handoffShown = shown
    this.#drawHandoffSteps(pause !== null)
    const status = this.#refusal ?? this.#statusText(summary, stopping, stopped)
    this.#controlStatus.classList.toggle('refused', this.#refusal !== null)
    setText(this.#controlStatus, status ?? '')
    // Nothing to control (no loop, no pause) and nothing to say: no empty box.
    this.#controls.hidden =
      this.#previous.hidden &&
      this.#stop.hidden &&
      this.#finish.hidden &&
      !this.#confirmStop.asking &&
      !this.#confirmFinish.asking &&
      status === null
  }

  /** What the controls say of the run's stop or handoff, from its events (the same for everyone). */
  #statusText(s: SessionSummary, stopping: boolean, stopped: boolean): string | null {
    const by = (record: ActionRecord | null): string => {
      const who = this.#actor(record)
      return who === undefined ? '' : ` by ${who}`
    }
    const ended = s.ended === null ? '' : ` The run ended: ${runState(s)}.`
    if (stopped) {
      const at = this.#stopAction?.updated_at
      return `Stopped${by(this.#stopAction)}${at ? ` at ${clock(at)}` : ''}: the agent’s loop has exited.${ended || ' The run finishes with its verdict.'}`
    }
    if (stopping) {
      const tool = this.#inbox?.stopping_tool
      return `Stopping${by(this.#stopAction)}: the agent finishes its current tool call${tool ? ` (${tool})` : ''}, then its loop exits.`
    }
    const last = s.lastEscalation
    if (last !== null && s.escalation === null) {
      const after = last.pausedS === null ? '' : ` after ${Math.round(last.pausedS)} s`
      if (last.endedBy === 'operator')
        return `Handed back${by(this.#finishAction)}${after}: the handoff is over, and a handoff never resumes the agent.${ended}`
      return `The handoff pause ${pauseEndText(last.endedBy)}${after}.${ended}`
    }
    return null
  }

  /**
   * How a run that has been replaced ended, as its controls said it (who stopped it or handed it back, and
   * its verdict); null when they said nothing. A stop the run accepted is over: its loop is gone with it.
   */
  #outcome(ended: SessionSummary): string | null {
    return this.#statusText(ended, false, this.#stopAction !== null)
  }

  /** Shows the previous run's outcome (null: none) with a way to dismiss it. */
  #showPrevious(outcome: string | null): void {
    this.#previous.hidden = outcome === null
    if (outcome === null) {
      replace(this.#previous)
      return
    }
    replace(
      this.#previous,
      h('p', {}, h('strong', {}, 'The previous run: '), outcome),
      h(
        'button',
        {
          type: 'button',
          class: 'secondary',
          onclick: () => {
            this.#showPrevious(null)
            this.#renderControls()
            // The button is gone: the keyboard goes to what the controls offer now, else the Inbox itself.
            const next = [this.#stop, this.#finish].find((b) => !b.hidden)
            if (next !== undefined) next.focus()
            else this.el.closest<HTMLElement>('[tabindex]')?.focus()
          },
        },
        'Dismiss',
      ),
    )
  }

  #emptyNotes(): void {
    if (this.#openList.querySelector('.question') === null && this.#openList.querySelector('.empty') === null)
      this.#openList.append(h('p', { class: 'empty muted' }, 'No open question.'))
    if (this.#openList.querySelector('.question') !== null) this.#openList.querySelector('.empty')?.remove()
    // No heading over nothing.
    this.#closedTitle.hidden = this.#closedList.querySelector('.question') === null
  }

  #shown(record: MessageRecord): Shown {
    const shown: Shown = { li: h('li', { class: 'message' }), state: h('span', { class: 'state' }), record }
    this.#fill(shown)
    return shown
  }

  #refill(): void {
    for (const shown of this.#messages.values()) this.#fill(shown)
  }

  /** Who sent a message, as a person reads it. */
  #sender(m: MessageRecord): string {
    if (m.sender === 'orchestrator') return 'The orchestrator (session token)'
    const you = `You (${this.#o.me})`
    if (m.key !== undefined && this.#ownKeys.has(m.key)) return you
    const who = m.key === undefined ? null : this.#o.activity.sender(m.key)
    if (who === undefined) return 'Looking up who sent it…'
    if (who === null) return 'Someone with the messaging token, not through this gateway'
    return who.name === this.#o.me ? you : who.name
  }

  #fill(shown: Shown): void {
    const m = shown.record
    shown.state.className = `state badge state-${m.state}`
    setText(shown.state, deliveryText(m.state, m.undelivered_reason))
    const question = m.reply_to === undefined ? undefined : this.#questions.get(m.reply_to)
    const values =
      m.values === undefined
        ? []
        : labelledValues(question?.request.fields ?? [], m.values, (id) => this.fileName(id))
    replace(
      shown.li,
      h(
        'p',
        { class: 'message-head' },
        h('span', { class: 'who' }, this.#sender(m)),
        m.reply_to === undefined
          ? ''
          : ` answered ${question === undefined ? m.reply_to : `“${question.request.title}”`}`,
        m.received_at ? ` · ${clock(m.received_at)}` : '',
        ' ',
        shown.state,
      ),
      m.text ? h('p', { class: 'message-text' }, m.text) : null,
      values.length === 0
        ? null
        : h(
            'dl',
            { class: 'values message-values' },
            ...values.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]),
          ),
      m.attachments && m.attachments.length > 0
        ? h(
            'ul',
            { class: 'message-files', 'aria-label': 'Attachments' },
            ...m.attachments.map((id) =>
              h('li', {}, h('a', { href: this.#files.url(id), download: '' }, this.fileName(id))),
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
      const a = await upload<UploadedAttachment>(this.#o.sessionPath, file)
      this.#files.remember(a)
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
    if (text === null || status === null || send === null) return
    const run = this.#run
    // A message names its run, which the page learns from the stream's first lines. Until then Send is disabled,
    // but Ctrl+Enter still comes here (the runtime not up, or those lines not in yet): say so rather than do
    // nothing. Otherwise a disabled Send means a send or an upload is under way.
    if (run === null) {
      this.#say(
        status,
        'Not sent: the run has not connected yet. Your message is kept; send it again in a moment.',
        true,
      )
      return
    }
    if (send.disabled) return
    const body = text.value.trim()
    const attachments = this.#attached.map((a) => a.id)
    if (body === '' && attachments.length === 0) {
      this.#say(status, 'Write a message or attach a file first.', true)
      text.focus()
      return
    }
    const content = JSON.stringify({ run, body, attachments })
    // The same content keeps its key, so a retry after a lost answer is not stored twice.
    if (this.#pendingKey?.content !== content) this.#pendingKey = { content, key: newKey() }
    const key = this.#pendingKey.key
    this.#ownKeys.add(key)
    const local: MessageRecord = { id: `local:${key}`, run, key, text: body, attachments, state: 'sending' }
    this.setMessage(local)
    send.disabled = true
    send.setAttribute('aria-busy', 'true')
    setText(send, 'Sending…')
    const sent = {
      run,
      key,
      ...(body === '' ? {} : { text: body }),
      ...(attachments.length === 0 ? {} : { attachments }),
    }
    try {
      const record = await post<MessageRecord>(`${this.#o.sessionPath}messages`, sent)
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
          : notSentText(err, 'message', { body: sent, text: body }),
        true,
      )
    } finally {
      send.removeAttribute('aria-busy')
      setText(send, 'Send')
      send.disabled = this.#uploading > 0
      text.focus()
    }
  }

  /**
   * Stop and "I'm done, finish" cannot be undone: each asks first, saying what it does, with the answer that
   * changes nothing where the keyboard is.
   */
  #ask(confirm: Confirm): void {
    this.#refusal = null
    confirm.ask()
    this.#renderControls()
  }

  /** The person kept things as they were: the keyboard goes back to the button that asked. */
  #keep(confirm: Confirm, trigger: HTMLButtonElement): void {
    confirm.hide()
    this.#renderControls()
    if (!trigger.hidden) trigger.focus()
    else this.#controlStatus.focus()
  }

  async #action(action: 'stop' | 'finish_handoff'): Promise<void> {
    const run = this.#run
    if (run === null) return
    this.#refusal = null
    const button = action === 'stop' ? this.#stop : this.#finish
    if (action === 'stop') {
      this.#confirmStop.hide()
      this.#stopSent = true
    } else {
      this.#confirmFinish.hide()
      this.#finishing = true
    }
    this.#renderControls()
    // The button is disabled while in flight: the status (where the outcome is said) keeps the keyboard.
    this.#controlStatus.focus()
    const key = newKey()
    this.#ownKeys.add(key)
    try {
      await post(`${this.#o.sessionPath}actions`, { run, key, action })
    } catch (err) {
      if (action === 'stop') this.#stopSent = false
      else this.#finishing = false
      const found =
        err instanceof ApiError && typeof err.body?.state === 'string'
          ? ` (the run is ${err.body.state})`
          : ''
      this.#refusal = `Refused: ${errorText(err)}${found}`
      this.#renderControls()
      announce(this.#refusal)
      if (!button.hidden) button.focus()
      return
    }
    this.#renderControls()
  }

  #say(target: HTMLElement, message: string, refusal: boolean): void {
    target.classList.toggle('refused', refusal)
    setText(target, message)
    if (refusal) announce(message)
  }
}
