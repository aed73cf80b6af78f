import type { EscalationView } from '../../overview/escalations.ts'
import { type AttachmentInfo, checkReply, type FieldDef, isFieldType } from '../../protocol/fields.ts'
import { ApiError, api, base, newKey, post, upload } from './api.ts'
import { Confirm } from './confirm.ts'
import { countdown } from './countdown.ts'
import { announce, h, replace, setText, uid } from './dom.ts'
import { renderEscalation } from './escalation.ts'
import { bytes, clock } from './format.ts'
import { closedByText } from './labels.ts'
import {
  type AnyField,
  isObject,
  type MessageRecord,
  type RequestRecord,
  type UploadedAttachment,
} from './records.ts'
import { errorText, notSentText } from './refusals.ts'

/** A free-text field limited to this many characters or fewer is one line; anything longer a textarea. */
const SHORT_TEXT = 80
/** How long a claim that went is given to turn out to be an answer's (the question closing) before it is called lapsed. */
const LAPSE_SETTLE_MS = 2000

/** What a question form needs from the session it belongs to. */
export interface QuestionContext {
  readonly kasmId: string
  /** `/desktop/<kasm_id>/mcp/` */
  readonly sessionPath: string
  readonly canWrite: boolean
  /** The person's display name (to tell their own "I'm on it" mark). */
  readonly me: string
  /** A message of the run by id, if the page has it (the answer that closed a question). */
  message(id: string): MessageRecord | undefined
  /** An attachment's file name and size as a person reads them (the value of an attachment field). */
  fileName(id: string): string
  /** This person's answer was stored: the inbox decides where the keyboard goes once the question closes. */
  answered(view: QuestionView): void
}

/** One field's input: what it holds, and where its error goes. */
interface FieldInput {
  readonly def: AnyField
  readonly el: HTMLElement
  /** The value to send, undefined when the person left it empty, or a string saying why it is not a value. */
  read(): { value?: unknown; problem?: string }
  /** Uploaded attachments by id (attachment fields), for checking `accept` and `max_bytes`. */
  readonly uploads?: Map<string, AttachmentInfo>
  /** An upload is still running. */
  busy?(): boolean
  error(message: string | null): void
  focus(): void
}

function describe(def: AnyField): string {
  const parts: string[] = []
  // Every field says whether it may be left empty: a new user cannot know the run's default.
  parts.push(def.required ? 'required' : 'optional')
  if (def.type === 'string' && def.max_length !== undefined)
    parts.push(`at most ${def.max_length} characters`)
  if (def.type === 'string' && def.pattern !== undefined) parts.push(`must match ${def.pattern}`)
  if ((def.type === 'integer' || def.type === 'number') && def.minimum !== undefined)
    parts.push(`at least ${def.minimum}`)
  if ((def.type === 'integer' || def.type === 'number') && def.maximum !== undefined)
    parts.push(`at most ${def.maximum}`)
  if (def.type === 'integer') parts.push('a whole number')
  if (def.type === 'number') parts.push('a number, decimals allowed')
  // An optional list left empty is no answer for the field, and min_items is checked only on a list given:
  // the hint must not promise the check refuses none (src/protocol/fields.ts, checkReply).
  if (def.type === 'string[]' && def.min_items !== undefined)
    parts.push(
      def.required ? `choose at least ${def.min_items}` : `choose none, or at least ${def.min_items}`,
    )
  if (def.type === 'string[]' && def.max_items !== undefined) parts.push(`choose at most ${def.max_items}`)
  if (def.type === 'attachment' && def.accept !== undefined) parts.push(`type ${def.accept.join(', ')}`)
  if (def.type === 'attachment' && def.max_bytes !== undefined) parts.push(`up to ${bytes(def.max_bytes)}`)
  return parts.join('; ')
}

/** The frame every field shares: label (or legend), help, constraints, error slot. */
function frameFor(def: AnyField, control: HTMLElement, group: boolean, controlId: string) {
  const hintId = uid('hint')
  const errorId = uid('error')
  const label = def.label ?? def.id
  const hintText = [def.help, describe(def)].filter((s) => s !== undefined && s !== '').join(' · ')
  const hint = hintText === '' ? null : h('p', { class: 'hint', id: hintId }, hintText)
  const errorEl = h('p', { class: 'field-error', id: errorId, hidden: true })
  const describedBy = [hint === null ? null : hintId, errorId].filter(Boolean).join(' ')
  let el: HTMLElement
  if (group) {
    el = h(
      'fieldset',
      { class: 'field', 'aria-describedby': describedBy },
      h('legend', {}, label),
      hint,
      control,
      errorEl,
    )
  } else {
    control.setAttribute('aria-describedby', describedBy)
    el = h('div', { class: 'field' }, h('label', { for: controlId }, label), hint, control, errorEl)
  }
  const error = (message: string | null): void => {
    errorEl.hidden = message === null
    setText(errorEl, message ?? '')
    const target = group ? el : control
    if (message === null) target.removeAttribute('aria-invalid')
    else target.setAttribute('aria-invalid', 'true')
  }
  return { el, error }
}

/** A field whose control's value is the answer as it stands, and empty means no answer (never sent). */
function textual(
  def: AnyField,
  control: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement,
  id: string,
): FieldInput {
  const f = frameFor(def, control, false, id)
  return {
    def,
    el: f.el,
    read: () => ({ value: control.value === '' ? undefined : control.value }),
    error: f.error,
    focus: () => control.focus(),
  }
}

function choiceGroup(def: AnyField, options: readonly string[], multiple: boolean) {
  const name = uid(def.id)
  const inputs = options.map((value, i) => {
    const id = `${name}-${i}`
    const input = h('input', { type: multiple ? 'checkbox' : 'radio', name, id, value })
    return { input, el: h('span', { class: 'choice' }, input, h('label', { for: id }, value)) }
  })
  return {
    inputs: inputs.map((i) => i.input),
    el: h('div', { class: 'choices' }, ...inputs.map((i) => i.el)),
  }
}

/** The input for one field, for every field type of protocol v1. */
function fieldInput(def: FieldDef, ctx: QuestionContext): FieldInput {
  const id = uid(`f-${def.id}`)
  switch (def.type) {
    case 'string': {
      if (
        def.enum !== undefined &&
        (def.hint === 'radio' || (def.hint !== 'select' && def.enum.length <= 4))
      ) {
        const group = choiceGroup(def, def.enum, false)
        const f = frameFor(def, group.el, true, id)
        return {
          def,
          el: f.el,
          read: () => ({ value: group.inputs.find((i) => i.checked)?.value }),
          error: f.error,
          focus: () => (group.inputs.find((i) => i.checked) ?? group.inputs[0])?.focus(),
        }
      }
      if (def.enum !== undefined) {
        const select = h(
          'select',
          { id },
          h('option', { value: '' }, 'Choose…'),
          ...def.enum.map((v) => h('option', { value: v }, v)),
        )
        return textual(def, select, id)
      }
      // Free text is a textarea unless the run asks for something short (a code, a name): a pattern, or a
      // limit of a line's length.
      const short =
        def.pattern !== undefined || (def.max_length !== undefined && def.max_length <= SHORT_TEXT)
      const input = short
        ? h('input', { id, type: 'text', autocomplete: 'off' })
        : h('textarea', { id, rows: 3 })
      return textual(def, input, id)
    }
    case 'integer':
    case 'number': {
      // A text input: type=number would refuse 1.25 (its step) and report an empty string for a bad value.
      const input = h('input', {
        id,
        type: 'text',
        inputmode: def.type === 'integer' ? 'numeric' : 'decimal',
        autocomplete: 'off',
      })
      const f = frameFor(def, input, false, id)
      const pattern = def.type === 'integer' ? /^[-+]?\d+$/ : /^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/
      return {
        def,
        el: f.el,
        read: () => {
          const raw = input.value.trim()
          if (raw === '') return {}
          if (!pattern.test(raw))
            return { problem: def.type === 'integer' ? 'must be a whole number' : 'must be a number' }
          return { value: Number(raw) }
        },
        error: f.error,
        focus: () => input.focus(),
      }
    }
    case 'boolean': {
      // Yes / No rather than a checkbox: an unticked box would be a value the person never gave.
      const group = choiceGroup(def, ['Yes', 'No'], false)
      const f = frameFor(def, group.el, true, id)
      return {
        def,
        el: f.el,
        read: () => {
          const chosen = group.inputs.find((i) => i.checked)?.value
          return chosen === undefined ? {} : { value: chosen === 'Yes' }
        },
        error: f.error,
        focus: () => (group.inputs.find((i) => i.checked) ?? group.inputs[0])?.focus(),
      }
    }
    case 'string[]': {
      const group = choiceGroup(def, def.enum ?? [], true)
      const f = frameFor(def, group.el, true, id)
      return {
        def,
        el: f.el,
        read: () => {
          const chosen = group.inputs.filter((i) => i.checked).map((i) => i.value)
          return chosen.length === 0 ? {} : { value: chosen }
        },
        error: f.error,
        focus: () => group.inputs[0]?.focus(),
      }
    }
    case 'attachment':
      return attachmentInput(def, ctx, id)
    default:
      throw new Error(`no input for ${def.type}`)
  }
}

/** An attachment field: the file is uploaded when chosen (checked first against `accept` and `max_bytes`). */
function attachmentInput(def: FieldDef, ctx: QuestionContext, id: string): FieldInput {
  const input = h('input', { id, type: 'file', accept: def.accept?.join(',') })
  const status = h('p', { class: 'upload-status', role: 'status' })
  const wrap = h('div', { class: 'upload' }, input, status)
  const f = frameFor(def, wrap, false, id)
  input.setAttribute('aria-describedby', wrap.getAttribute('aria-describedby') ?? '')
  wrap.removeAttribute('aria-describedby')
  const uploads = new Map<string, AttachmentInfo>()
  let uploaded: string | undefined
  let running = false
  input.addEventListener('change', () => {
    const file = input.files?.[0]
    uploaded = undefined
    uploads.clear()
    f.error(null)
    if (file === undefined) {
      setText(status, '')
      return
    }
    const local = checkReply([def], { [def.id]: 'local' }, () => ({
      mime: file.type || 'application/octet-stream',
      size: file.size,
    }))
    if (local.length > 0) {
      f.error(local[0]?.error ?? 'not accepted')
      setText(status, '')
      return
    }
    running = true
    setText(status, `Uploading ${file.name}…`)
    upload<UploadedAttachment>(ctx.sessionPath, file).then(
      (a) => {
        running = false
        uploaded = a.id
        uploads.set(a.id, { mime: a.mime, size: a.size })
        setText(status, `${a.name} (${bytes(a.size)}) uploaded`)
      },
      (err: unknown) => {
        running = false
        setText(status, '')
        f.error(
          err instanceof ApiError && err.status === 413
            ? 'the file is too large for this session'
            : errorText(err),
        )
      },
    )
  })
  return {
    def,
    el: f.el,
    uploads,
    busy: () => running,
    read: () => (uploaded === undefined ? {} : { value: uploaded }),
    error: f.error,
    focus: () => input.focus(),
  }
}

/** What a field asks for, in words: a viewer's list of a question's fields (never the raw type). */
export function fieldSummary(def: AnyField): string {
  const what =
    def.type === 'boolean'
      ? 'Yes or No'
      : def.type === 'integer'
        ? 'a whole number'
        : def.type === 'number'
          ? 'a number'
          : def.type === 'string[]'
            ? `any of ${(def.enum ?? []).join(', ')}`
            : def.type === 'attachment'
              ? 'a file'
              : def.enum !== undefined
                ? `one of ${def.enum.join(', ')}`
                : 'text'
  return def.required ? `${what}, required` : what
}

/** A value as the question card shows it: Yes/No for a boolean, a list joined, a file by its name. */
export function showValue(value: unknown, fileName?: (id: string) => string): string {
  if (Array.isArray(value)) return value.map((v) => showValue(v, fileName)).join(', ')
  if (typeof value === 'boolean') return value ? 'Yes' : 'No'
  if (typeof value === 'string' && fileName !== undefined) return fileName(value)
  if (typeof value === 'object' && value !== null) return JSON.stringify(value)
  return String(value)
}

/**
 * A reply's values by the request's fields, in their order and with their labels ("Submit anyway: Yes");
 * values of fields the request does not list (a newer release) follow by their ids.
 */
export function labelledValues(
  fields: readonly AnyField[],
  values: Record<string, unknown>,
  fileName?: (id: string) => string,
): [string, string][] {
  const out: [string, string][] = []
  for (const f of fields)
    if (f.id in values)
      out.push([f.label ?? f.id, showValue(values[f.id], f.type === 'attachment' ? fileName : undefined)])
  for (const [id, v] of Object.entries(values))
    if (!fields.some((f) => f.id === id)) out.push([id, showValue(v)])
  return out
}

/** A reply's delivery state as the answer card says it. */
const REPLY_STATE: Record<string, string> = {
  sending: 'Sending…',
  pending: 'Waiting for the run to take it…',
  queued: 'Taken by the run',
  dispatched: 'Taken by the run',
  responded: 'Responded',
  unknown: 'Taken by the run; it cannot tell whether its model saw it',
  undelivered: 'Not delivered',
}

/** A reply's delivery state in words (`undelivered` with its reason). */
export function replyStateText(m: MessageRecord): string {
  const words = REPLY_STATE[m.state] ?? m.state
  return m.state === 'undelivered' && m.undelivered_reason ? `${words}: ${m.undelivered_reason}` : words
}

/** What the card says of the person's own answer, until its delivery state is final. */
function sentText(m: MessageRecord | null): string {
  if (m === null || m.state === 'pending' || m.state === 'sending')
    return 'Answer sent. Waiting for the run to take it…'
  return `Answer sent. ${replyStateText(m)}.`
}

/**
 * One question of the run: a form for every field type of the protocol, validated in the page with the
 * runtime's own rules before it is sent, the runtime's 422 errors shown at their fields, and a 409 (someone
 * answered first) shown with who and what. A field type the console does not know shows the raw request and
 * offers no Answer. Built once per request and updated in place; the reply's delivery state follows live
 * ("Taken by the run", "Responded").
 */
export class QuestionView {
  readonly el: HTMLElement
  #request: RequestRecord
  readonly #ctx: QuestionContext
  readonly #title: HTMLElement
  readonly #body: HTMLElement
  readonly #status: HTMLElement
  readonly #claimLine: HTMLElement
  readonly #claimButton: HTMLButtonElement | null
  #inputs: FieldInput[] = []
  #submit: HTMLButtonElement | null = null
  /** "Send an empty answer?", asked when every field is left empty. */
  #confirmEmpty: Confirm | null = null
  #key: { values: string; key: string } | null = null
  #holder: string | null = null
  /** The question's escalation steps (from the overview), and what they were last drawn from. */
  readonly #steps: HTMLElement
  #escalation: EscalationView | null = null
  #stepsDrawn = ''
  /** This person gave the claim back from this card (so its going is no lapse). */
  #released = false
  #lapseCheck: ReturnType<typeof setTimeout> | null = null
  #rendered: 'open' | 'closed' | null = null
  /** The reply this person sent from this card (its record as last seen), once the runtime stored it. */
  #mine: MessageRecord | null = null
  /** The reply that closed the question, as last seen (anyone's). */
  #reply: MessageRecord | null = null
  /** Where the closed card shows the reply's delivery state. */
  #delivery: HTMLElement | null = null

  constructor(request: RequestRecord, ctx: QuestionContext) {
    this.#request = request
    this.#ctx = ctx
    const titleId = uid('q')
    this.#status = h('p', { class: 'form-status', role: 'status', tabindex: '-1' })
    this.#claimLine = h('p', { class: 'claim-line' })
    this.#steps = h('div', { class: 'q-steps', hidden: true })
    this.#claimButton = ctx.canWrite
      ? h(
          'button',
          {
            type: 'button',
            class: 'secondary',
            'aria-pressed': 'false',
            onclick: () => void this.#toggleClaim(),
          },
          'I’m on it',
        )
      : null
    this.#body = h('div', { class: 'q-body' })
    this.#title = h('h3', { id: titleId, tabindex: '-1' }, request.title)
    this.el = h(
      'article',
      { class: 'question', 'aria-labelledby': titleId, 'data-request': request.request_id },
      this.#title,
      h('p', { class: 'q-meta' }),
      h('div', { class: 'claim' }, this.#claimLine, this.#claimButton),
      this.#steps,
      this.#body,
      this.#status,
    )
    this.update(request)
  }

  get requestId(): string {
    return this.#request.request_id
  }

  /** The request as last seen. */
  get request(): RequestRecord {
    return this.#request
  }

  /** This person answered it from this card (so its closing is the result of what they did). */
  get answeredHere(): boolean {
    return this.#mine !== null
  }

  /** Puts the keyboard on the question: its first field, or its title when it has none to fill. */
  focusFirst(): void {
    const first = this.#inputs[0]
    // A card already in view (a wide screen) stays where it is; else its top goes to the top of the screen.
    const seen = (el: Element): boolean => {
      const r = el.getBoundingClientRect()
      return r.top >= 0 && r.bottom <= window.innerHeight
    }
    if (!seen(this.#title) || (first !== undefined && !seen(first.el)))
      this.el.scrollIntoView({ block: 'start' })
    if (first !== undefined) first.focus()
    else this.#title.focus()
  }

  /** Puts the keyboard on the result of an answer (what the card says now). */
  focusResult(): void {
    this.el.scrollIntoView({ block: 'nearest' })
    if (this.#status.textContent !== '') this.#status.focus()
    else this.#title.focus()
  }

  /** A newer record of the request (a `request` event, a GET). */
  update(request: RequestRecord): void {
    this.#request = request
    const meta = this.el.querySelector('.q-meta') as HTMLElement
    if (request.state === 'open') {
      replace(
        meta,
        `${request.request_id} · `,
        request.deadline
          ? countdown(request.deadline, { prefix: 'answer within ', suffix: '' })
          : 'no deadline',
      )
      if (this.#rendered !== 'open') this.#renderOpen()
    } else {
      replace(
        meta,
        `${request.request_id} · ${closedByText(request.closed_by)}${request.closed_at ? ` at ${clock(request.closed_at)}` : ''}`,
      )
      if (this.#rendered !== 'closed') this.#renderClosed()
    }
    this.#claimUi()
  }

  /** A message of the run that answers this question, new or at a later delivery state. */
  replyChanged(m: MessageRecord): void {
    if (m.reply_to !== this.#request.request_id) return
    if (this.#mine !== null && (m.id === this.#mine.id || m.key === this.#mine.key)) {
      this.#mine = m
      this.#say(sentText(m), m.state === 'undelivered')
    }
    if (this.#request.reply_id === undefined || this.#request.reply_id === m.id) {
      this.#reply = m
      if (this.#delivery !== null) setText(this.#delivery, replyStateText(m))
    }
  }

  /** The "I'm on it" mark from the overview (shared across replicas): who holds the question, if anyone. */
  setHolder(name: string | null): void {
    const was = this.#holder
    this.#holder = name
    if (was !== null && was === this.#ctx.me && name === null) this.#maybeLapsed()
    if (name !== null) this.#released = false
    this.#claimUi()
  }

  /** The question's escalation (from the overview), or null when it has none. */
  setEscalation(view: EscalationView | null): void {
    this.#escalation = view
    this.#drawSteps()
  }

  #drawSteps(): void {
    const open = this.#request.state === 'open'
    const view = open ? this.#escalation : null
    // Redrawn only when it changed: the overview sends a session's frame every few seconds, and a list
    // rebuilt under a screen reader's cursor loses its place.
    const drawn = JSON.stringify([view, this.#holder])
    if (drawn === this.#stepsDrawn) return
    this.#stepsDrawn = drawn
    renderEscalation(this.#steps, view, this.#holder === this.#ctx.me ? 'you' : this.#holder)
  }

  /**
   * This person's claim went without their giving it back here: once the question has had a moment to
   * close (an answer clears the claim too, and its closing may arrive just after), a question still open
   * and held by nobody means the claim lapsed, and the card says so.
   */
  #maybeLapsed(): void {
    if (this.#released || this.#mine !== null || this.#request.state !== 'open') return
    if (this.#lapseCheck !== null) clearTimeout(this.#lapseCheck)
    this.#lapseCheck = setTimeout(() => {
      this.#lapseCheck = null
      if (this.#request.state !== 'open' || this.#holder !== null || this.#mine !== null) return
      const text = 'Your “I’m on it” lapsed: nobody answered in time, so the escalation goes on.'
      this.#status.classList.remove('refused')
      setText(this.#status, text)
    }, LAPSE_SETTLE_MS)
  }

  #claimUi(): void {
    this.#drawSteps()
    const open = this.#request.state === 'open'
    setText(
      this.#claimLine,
      !open || this.#holder === null
        ? ''
        : this.#holder === this.#ctx.me
          ? 'You are on it.'
          : `${this.#holder} is on it.`,
    )
    const b = this.#claimButton
    if (b === null) return
    b.hidden = !open || (this.#holder !== null && this.#holder !== this.#ctx.me)
    const mine = this.#holder === this.#ctx.me
    b.setAttribute('aria-pressed', String(mine))
    setText(b, mine ? 'Release' : 'I’m on it')
  }

  async #toggleClaim(): Promise<void> {
    const b = this.#claimButton
    if (b === null) return
    const mine = this.#holder === this.#ctx.me
    const path = `${base}api/sessions/${encodeURIComponent(this.#ctx.kasmId)}/requests/${encodeURIComponent(this.#request.request_id)}/claim?run=${encodeURIComponent(this.#request.run)}`
    b.disabled = true
    b.setAttribute('aria-busy', 'true')
    setText(b, mine ? 'Releasing…' : 'Taking…')
    try {
      if (mine) this.#released = true
      await api(path, { method: mine ? 'DELETE' : 'PUT' })
      this.setHolder(mine ? null : this.#ctx.me)
    } catch (err) {
      this.#released = false
      this.#say(`Not taken: ${errorText(err)}`, true)
    } finally {
      b.disabled = false
      b.removeAttribute('aria-busy')
      this.#claimUi()
    }
  }

  #renderOpen(): void {
    this.#rendered = 'open'
    const r = this.#request
    const unknown = r.fields.filter((f) => !isFieldType(f.type))
    const help = r.help ? h('p', { class: 'q-help' }, r.help) : null
    if (unknown.length > 0) {
      // Never guess a value for a type this console does not know: show what the run asked, offer no Answer.
      replace(
        this.#body,
        help,
        h(
          'p',
          { class: 'richer' },
          `This request needs a richer UI: the console does not know the field type${unknown.length > 1 ? 's' : ''} ${unknown.map((f) => `“${f.type}”`).join(', ')}. Answer it with a client that does.`,
        ),
        h(
          'details',
          { open: true },
          h('summary', {}, 'The request as the run sent it'),
          h('pre', { class: 'raw', tabindex: '0' }, JSON.stringify(r, null, 2)),
        ),
      )
      return
    }
    if (!this.#ctx.canWrite) {
      replace(
        this.#body,
        help,
        h(
          'ul',
          { class: 'q-fields' },
          ...r.fields.map((f) => h('li', {}, h('strong', {}, f.label ?? f.id), `: ${fieldSummary(f)}`)),
        ),
        h('p', { class: 'muted' }, 'Your role can read this question but not answer it.'),
      )
      return
    }
    this.#inputs = r.fields.map((f) => fieldInput(f as FieldDef, this.#ctx))
    this.#submit = h('button', { type: 'submit' }, 'Answer')
    const submit = this.#submit
    const empty = new Confirm({
      question: 'Send an empty answer?',
      detail:
        'Every field is left empty: the run gets an answer without any value, and the question closes for everyone.',
      keep: 'Go back',
      go: 'Yes, send it empty',
      onGo: () => {
        empty.hide()
        submit.hidden = false
        void this.#answer(true)
      },
      onKeep: () => {
        empty.hide()
        submit.hidden = false
        this.#say('', false)
        submit.focus()
      },
    })
    this.#confirmEmpty = empty
    const form = h(
      'form',
      { class: 'q-form', novalidate: true },
      help,
      ...this.#inputs.map((i) => i.el),
      h('div', { class: 'actions' }, this.#submit),
      empty.el,
    )
    // Filling a field in answers the question the confirmation asked: the Answer button is back.
    form.addEventListener('input', (e) => {
      if (!empty.asking || empty.el.contains(e.target as Node)) return
      empty.hide()
      submit.hidden = false
    })
    form.addEventListener('submit', (e) => {
      e.preventDefault()
      void this.#answer()
    })
    // In a textarea Enter is a new line: Ctrl/Cmd+Enter answers, as it sends in the compose box.
    form.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey) && e.target instanceof HTMLTextAreaElement) {
        e.preventDefault()
        void this.#answer()
      }
    })
    replace(this.#body, form)
  }

  #renderClosed(): void {
    this.#rendered = 'closed'
    this.#inputs = []
    this.#submit = null
    this.#confirmEmpty = null
    const r = this.#request
    const answer = h('div', { class: 'answer' })
    replace(this.#body, answer)
    if (r.closed_by === 'reply') void this.#showAnswer(answer, null)
  }

  /** Who answered (from the gateway's audit), what (from the run's messages) and where the reply is now. */
  async #showAnswer(target: HTMLElement, prefix: string | null): Promise<void> {
    const r = this.#request
    const who = await api<{ name: string; at: string }>(
      `${base}api/sessions/${encodeURIComponent(this.#ctx.kasmId)}/requests/${encodeURIComponent(r.request_id)}/answer?run=${encodeURIComponent(r.run)}`,
    ).catch(() => null)
    let reply = r.reply_id === undefined ? undefined : this.#ctx.message(r.reply_id)
    if (reply === undefined && r.reply_id !== undefined) {
      reply = await api<MessageRecord>(
        `${this.#ctx.sessionPath}messages/${encodeURIComponent(r.reply_id)}`,
      ).catch(() => undefined)
    }
    // A delivery event may have come meanwhile: the latest record wins.
    if (this.#reply !== null && (reply === undefined || (this.#reply.rev ?? 0) >= (reply.rev ?? 0)))
      reply = this.#reply
    if (reply !== undefined) this.#reply = reply
    const line =
      who === null
        ? 'Answered outside the gateway or before its records.'
        : `Answered by ${who.name} at ${clock(who.at)}.`
    const values = labelledValues(r.fields, reply?.values ?? {}, (id) => this.#ctx.fileName(id))
    this.#delivery =
      reply === undefined ? null : h('span', { class: 'badge reply-state' }, replyStateText(reply))
    replace(
      target,
      h(
        'p',
        {},
        prefix === null ? line : `${prefix} ${line}`,
        this.#delivery === null ? '' : ' ',
        this.#delivery,
      ),
      values.length === 0
        ? null
        : h('dl', { class: 'values' }, ...values.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])),
    )
    // The answer came in above the result the keyboard is on (the card grew): keep that result in view.
    if (document.activeElement === this.#status) this.#status.scrollIntoView({ block: 'nearest' })
  }

  /** Checks and sends the answer; one that leaves every field empty is sent only once `empty` is confirmed. */
  async #answer(empty = false): Promise<void> {
    if (this.#submit === null || this.#submit.disabled) return
    const values: Record<string, unknown> = {}
    const uploads = new Map<string, AttachmentInfo>()
    const flagged = new Set<FieldInput>()
    const flag = (input: FieldInput, message: string): void => {
      if (flagged.has(input)) return
      flagged.add(input)
      input.error(message)
    }
    for (const input of this.#inputs) {
      input.error(null)
      if (input.busy?.()) {
        flag(input, 'wait until the upload has finished')
        continue
      }
      const { value, problem } = input.read()
      if (problem !== undefined) flag(input, problem)
      else if (value !== undefined) values[input.def.id] = value
      for (const [id, info] of input.uploads ?? []) uploads.set(id, info)
    }
    // The runtime's own rules, here first: the person sees what is wrong before any round trip.
    for (const issue of checkReply(
      this.#request.fields as FieldDef[],
      values,
      (id) => uploads.get(id) ?? null,
    )) {
      const input = this.#inputs.find((i) => i.def.id === issue.field)
      if (input !== undefined) flag(input, issue.error)
    }
    const first = this.#inputs.find((i) => flagged.has(i))
    if (first !== undefined) {
      this.#say('Check the highlighted fields.', true)
      first.focus()
      return
    }
    if (!empty && Object.keys(values).length === 0 && this.#confirmEmpty !== null) {
      this.#submit.hidden = true
      this.#say('', false)
      this.#confirmEmpty.ask()
      return
    }
    const content = JSON.stringify(values)
    if (this.#key?.values !== content) this.#key = { values: content, key: newKey() }
    const r = this.#request
    // The button is about to be disabled (it would drop the focus to the page): the card's status has it.
    this.#say('Sending the answer…', false)
    this.#status.focus()
    this.#busy(true)
    const sent = { run: r.run, key: this.#key.key, reply_to: r.request_id, revision: r.revision, values }
    try {
      const stored = await post<MessageRecord>(`${this.#ctx.sessionPath}messages`, sent)
      // The delivery events may have come first: keep the latest record.
      this.#mine = this.#mine !== null && (this.#mine.rev ?? 0) > (stored.rev ?? 0) ? this.#mine : stored
      const seen = this.#ctx.message(stored.id)
      if (seen !== undefined && (seen.rev ?? 0) > (this.#mine.rev ?? 0)) this.#mine = seen
      this.#say(sentText(this.#mine), false)
      this.#ctx.answered(this)
    } catch (err) {
      await this.#refused(err, sent)
    } finally {
      this.#busy(false)
    }
  }

  async #refused(err: unknown, sent: unknown): Promise<void> {
    if (!(err instanceof ApiError)) {
      this.#say(errorText(err), true)
      return
    }
    if (err.status === 422 && Array.isArray(err.body?.fields)) {
      let first: FieldInput | null = null
      for (const item of err.body.fields as unknown[]) {
        if (!isObject(item) || typeof item.field !== 'string') continue
        const input = this.#inputs.find((i) => i.def.id === item.field)
        input?.error(String(item.error ?? 'refused'))
        first ??= input ?? null
      }
      this.#say('The run refused the answer: see the fields.', true)
      first?.focus()
      return
    }
    if (err.status === 409 && (err.code === 'request_closed' || err.code === 'unknown_request')) {
      const fresh = await api<RequestRecord>(
        `${this.#ctx.sessionPath}requests/${encodeURIComponent(this.#request.request_id)}`,
      ).catch(() => null)
      if (fresh !== null) this.#request = { ...fresh }
      this.#rendered = 'closed'
      const answer = h('div', { class: 'answer' })
      replace(this.#body, answer)
      this.update(this.#request)
      if (this.#request.closed_by === 'reply') await this.#showAnswer(answer, 'Someone answered first.')
      else
        setText(
          answer,
          `This question was ${closedByText(this.#request.closed_by)} before your answer arrived.`,
        )
      this.#say('Your answer was not needed: the question had closed.', true)
      this.#status.focus()
      return
    }
    if (err.status === 409 && typeof err.body?.run === 'string' && err.body.run !== this.#request.run) {
      this.#say('The session has moved on to a new run; this question belongs to the previous one.', true)
      return
    }
    this.#say(notSentText(err, 'answer', { body: sent }), true)
  }

  #busy(on: boolean): void {
    const b = this.#submit
    if (b === null) return
    b.disabled = on
    if (on) b.setAttribute('aria-busy', 'true')
    else b.removeAttribute('aria-busy')
    setText(b, on ? 'Sending…' : 'Answer')
  }

  #say(message: string, refusal: boolean): void {
    this.#status.classList.toggle('refused', refusal)
    setText(this.#status, message)
    if (refusal) announce(message)
  }
}
