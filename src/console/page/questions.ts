import { type AttachmentInfo, checkReply, type FieldDef, isFieldType } from '../../protocol/fields.ts'
import { ApiError, api, base, newKey, post, upload } from './api.ts'
import { announce, h, replace, setText, uid } from './dom.ts'
import { bytes, clock } from './format.ts'
import { closedByText } from './labels.ts'
import { countdown } from './overview-view.ts'
import {
  type AnyField,
  isObject,
  type MessageRecord,
  type RequestRecord,
  type UploadedAttachment,
} from './records.ts'

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
  if (def.required) parts.push('required')
  if (def.type === 'string' && def.max_length !== undefined)
    parts.push(`at most ${def.max_length} characters`)
  if (def.type === 'string' && def.pattern !== undefined) parts.push(`must match ${def.pattern}`)
  if ((def.type === 'integer' || def.type === 'number') && def.minimum !== undefined)
    parts.push(`at least ${def.minimum}`)
  if ((def.type === 'integer' || def.type === 'number') && def.maximum !== undefined)
    parts.push(`at most ${def.maximum}`)
  if (def.type === 'integer') parts.push('a whole number')
  if (def.type === 'number') parts.push('a number, decimals allowed')
  if (def.type === 'string[]' && def.min_items !== undefined) parts.push(`choose at least ${def.min_items}`)
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
      const long = (def.max_length ?? 1000) > 200
      const input = long
        ? h('textarea', { id, rows: 3 })
        : h('input', { id, type: 'text', autocomplete: 'off' })
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

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

/**
 * One question of the run: a form for every field type of the protocol, validated in the page with the
 * runtime's own rules before it is sent, the runtime's 422 errors shown at their fields, and a 409 (someone
 * answered first) shown with who and what. A field type the console does not know shows the raw request and
 * offers no Answer. Built once per request and updated in place.
 */
export class QuestionView {
  readonly el: HTMLElement
  #request: RequestRecord
  readonly #ctx: QuestionContext
  readonly #body: HTMLElement
  readonly #status: HTMLElement
  readonly #claimLine: HTMLElement
  readonly #claimButton: HTMLButtonElement | null
  #inputs: FieldInput[] = []
  #submit: HTMLButtonElement | null = null
  #key: { values: string; key: string } | null = null
  #holder: string | null = null
  #rendered: 'open' | 'closed' | null = null

  constructor(request: RequestRecord, ctx: QuestionContext) {
    this.#request = request
    this.#ctx = ctx
    const titleId = uid('q')
    this.#status = h('p', { class: 'form-status', role: 'status', tabindex: '-1' })
    this.#claimLine = h('p', { class: 'claim-line' })
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
    this.el = h(
      'article',
      { class: 'question', 'aria-labelledby': titleId, 'data-request': request.request_id },
      h('h3', { id: titleId }, request.title),
      h('p', { class: 'q-meta' }),
      h('div', { class: 'claim' }, this.#claimLine, this.#claimButton),
      this.#body,
      this.#status,
    )
    this.update(request)
  }

  get requestId(): string {
    return this.#request.request_id
  }

  /** A newer record of the request (a `request` event, a GET). */
  update(request: RequestRecord): void {
    this.#request = request
    const meta = this.el.querySelector('.q-meta') as HTMLElement
    if (request.state === 'open') {
      replace(
        meta,
        `${request.request_id} · `,
        request.deadline ? countdown(request.deadline, 'answer within ') : 'no deadline',
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

  /** The "I'm on it" mark from the overview (shared across replicas): who holds the question, if anyone. */
  setHolder(name: string | null): void {
    this.#holder = name
    this.#claimUi()
  }

  #claimUi(): void {
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
      await api(path, { method: mine ? 'DELETE' : 'PUT' })
      this.setHolder(mine ? null : this.#ctx.me)
    } catch (err) {
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
        h('ul', { class: 'q-fields' }, ...r.fields.map((f) => h('li', {}, `${f.label ?? f.id} (${f.type})`))),
        h('p', { class: 'muted' }, 'Your role can read this question but not answer it.'),
      )
      return
    }
    this.#inputs = r.fields.map((f) => fieldInput(f as FieldDef, this.#ctx))
    this.#submit = h('button', { type: 'submit' }, 'Answer')
    const form = h(
      'form',
      { class: 'q-form', novalidate: true },
      help,
      ...this.#inputs.map((i) => i.el),
      h('div', { class: 'actions' }, this.#submit),
    )
    form.addEventListener('submit', (e) => {
      e.preventDefault()
      void this.#answer()
    })
    replace(this.#body, form)
  }

  #renderClosed(): void {
    const focused = this.el.contains(document.activeElement)
    this.#rendered = 'closed'
    this.#inputs = []
    this.#submit = null
    const r = this.#request
    const answer = h('div', { class: 'answer' })
    replace(this.#body, answer)
    if (r.closed_by === 'reply') void this.#showAnswer(answer, null)
    if (focused) this.#status.focus()
  }

  /** Who answered (from the gateway's audit) and what (from the run's messages). */
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
    const line =
      who === null
        ? 'Answered outside the gateway or before its records.'
        : `Answered by ${who.name} at ${clock(who.at)}.`
    const values = reply?.values ?? {}
    replace(
      target,
      h('p', {}, prefix === null ? line : `${prefix} ${line}`),
      Object.keys(values).length === 0
        ? null
        : h(
            'dl',
            { class: 'values' },
            ...r.fields.flatMap((f) =>
              f.id in values ? [h('dt', {}, f.label ?? f.id), h('dd', {}, show(values[f.id]))] : [],
            ),
          ),
    )
  }

  async #answer(): Promise<void> {
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
    const content = JSON.stringify(values)
    if (this.#key?.values !== content) this.#key = { values: content, key: newKey() }
    const r = this.#request
    this.#busy(true)
    try {
      await post(`${this.#ctx.sessionPath}messages`, {
        run: r.run,
        key: this.#key.key,
        reply_to: r.request_id,
        revision: r.revision,
        values,
      })
      this.#say('Answer sent. Waiting for the run to take it…', false)
    } catch (err) {
      await this.#refused(err)
    } finally {
      this.#busy(false)
    }
  }

  async #refused(err: unknown): Promise<void> {
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
      return
    }
    if (err.status === 409 && typeof err.body?.run === 'string' && err.body.run !== this.#request.run) {
      this.#say('The session has moved on to a new run; this question belongs to the previous one.', true)
      return
    }
    this.#say(`Not sent: ${err.message}`, true)
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

function show(value: unknown): string {
  if (Array.isArray(value)) return value.join(', ')
  if (typeof value === 'boolean') return value ? 'Yes' : 'No'
  return String(value)
}
