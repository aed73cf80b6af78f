import type { ActionsBlock, Button, InputBlock, KnownBlock, ModalView, PlainTextOption } from '@slack/web-api'
import type { ClaimNotice } from '../../notify/notification.ts'
import type { FieldDef, FieldIssue } from '../../protocol/fields.ts'
import {
  type Closing,
  clip,
  closingParts,
  describe,
  encodeRef,
  formFor,
  labelOf,
  type QuestionView,
} from '../questions.ts'

export {
  type Choice,
  type Closing,
  clip,
  decodeRef,
  encodeRef,
  type FormKind,
  formFor,
  type QuestionRef,
  type QuestionView,
  type ReplyClosing,
} from '../questions.ts'

/**
 * Block Kit for the Slack app, as pure functions: a question's message and its closing, the answer modal, the
 * ephemeral replies, and the way back from a modal's state to a reply's values. Every text from a runtime is
 * escaped for mrkdwn (`&`, `<`, `>`: no mention, link or channel ping can be smuggled in) or goes into
 * `plain_text`, and is clipped to what Slack accepts.
 */

/** The ids the gateway's blocks and views use. */
export const ACTION = {
  /** A choice button: `krg:choose:<index>`. */
  choose: 'krg:choose',
  answer: 'krg:answer',
  console: 'krg:console',
  connect: 'krg:connect',
  /** "This is not me", on the direct message with a code to link an account: its value names the link. */
  notMe: 'krg:link-not-me',
  /** "I'm on it", beside the answers while nobody holds the question. */
  claim: 'krg:claim',
  /** "Give it back", in its place while someone holds it. */
  release: 'krg:release',
} as const
export const MODAL_CALLBACK = 'krg:answer'
const INPUT_ACTION = 'v'
const FIELD_BLOCK = 'f:'

// Slack's limits (Block Kit reference).
const MAX_RADIOS = 10
const OPTION_TEXT = 75
const SECTION_TEXT = 3000
const LABEL_TEXT = 2000
const HINT_TEXT = 2000
const INPUT_MAX = 3000
const BUTTON_TEXT = 75
/** A string field gets a text area when it may be longer than this. */
const MULTILINE_OVER = 200

/** Escapes text for mrkdwn as Slack documents it. */
export function escapeMrkdwn(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;')
}

/**
 * Text in mrkdwn whose formatting is the gateway's own: the fixed parts of an {@link md} template, with every
 * value in it escaped. What renders the gateway's replies (ephemeral messages, notice modals) takes only
 * this, so a runtime's string (a field's label, `pattern` or `enum`, a 422's messages, an error code) reaches
 * Slack escaped, whichever way it travels.
 */
export class Mrkdwn {
  readonly text: string

  /**
   * Only for text already mrkdwn with every value escaped: a closing line as the message store kept it
   * ({@link closingLine} made it). Everything else is built with {@link md}.
   */
  constructor(text: string) {
    this.text = text
  }

  /** `parts` joined by the fixed `separator`. */
  static join(parts: readonly Mrkdwn[], separator: string): Mrkdwn {
    return new Mrkdwn(parts.map((p) => p.text).join(separator))
  }
}

/** A value in an {@link md} template: a string or number is escaped, a {@link Mrkdwn} kept as it is. */
export type MrkdwnValue = string | number | Mrkdwn

/** mrkdwn from a template: its fixed parts as written, every value escaped (see {@link Mrkdwn}). */
export function md(strings: TemplateStringsArray, ...values: readonly MrkdwnValue[]): Mrkdwn {
  let text = strings[0] ?? ''
  values.forEach((value, i) => {
    text += value instanceof Mrkdwn ? value.text : escapeMrkdwn(String(value))
    text += strings[i + 1] ?? ''
  })
  return new Mrkdwn(text)
}

/** Slack's date formatting in the reader's own time zone, with a UTC fallback for clients that lack it. */
export function slackDate(iso: string): string {
  const ms = Date.parse(iso)
  if (Number.isNaN(ms)) return escapeMrkdwn(iso)
  const fallback = `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`
  return `<!date^${Math.floor(ms / 1000)}^{date_short_pretty} at {time}|${fallback}>`
}

/** A time of day in the reader's own time zone, with `HH:MM UTC` for clients that lack it. */
export function slackTime(iso: string): string {
  const ms = Date.parse(iso)
  if (Number.isNaN(ms)) return escapeMrkdwn(iso)
  return `<!date^${Math.floor(ms / 1000)}^{time}|${new Date(ms).toISOString().slice(11, 16)} UTC>`
}

const plain = (text: string, max = SECTION_TEXT) => ({
  type: 'plain_text' as const,
  text: clip(text, max),
  emoji: false,
})
const mrkdwn = (text: string) => ({ type: 'mrkdwn' as const, text: clip(text, SECTION_TEXT) })

/** One line per field: its name and what it takes. */
function fieldLines(fields: readonly FieldDef[]): string {
  return fields
    .map(
      (f) => `• *${escapeMrkdwn(clip(labelOf(f), 100))}*${f.required ? '' : ' (optional)'}: ${describeMd(f)}`,
    )
    .join('\n')
}

function describeMd(field: FieldDef): string {
  return describe(field, (list) => clip(list.map((o) => escapeMrkdwn(o)).join(', '), 300))
}

/** The link to the session in mrkdwn. */
function sessionLink(view: { kasmId: string; team: string; url: string }): string {
  return `<${view.url}|session ${escapeMrkdwn(view.kasmId)}> (team ${escapeMrkdwn(view.team)})`
}

function consoleButton(url: string, label = 'Open in console'): Button {
  return { type: 'button', action_id: ACTION.console, text: plain(label, BUTTON_TEXT), url }
}

/**
 * The blocks both the open and the closed message start with: what is asked, in which session, and what
 * each field takes (not for a single choice whose buttons say it).
 */
function questionBlocks(view: QuestionView, lead: string): KnownBlock[] {
  const blocks: KnownBlock[] = [
    { type: 'section', text: mrkdwn(`${lead} in ${sessionLink(view)}`) },
    {
      type: 'section',
      text: mrkdwn(
        `*${escapeMrkdwn(clip(view.title, 500))}*${view.help ? `\n${escapeMrkdwn(clip(view.help, 1500))}` : ''}`,
      ),
    },
  ]
  if (view.fields.length > 0 && formFor(view.fields).kind !== 'buttons')
    blocks.push({ type: 'section', text: mrkdwn(fieldLines(view.fields)) })
  return blocks
}

function contextLine(view: QuestionView): KnownBlock {
  const until = view.deadline === null ? 'No deadline' : `Answer by ${slackDate(view.deadline)}`
  return { type: 'context', elements: [mrkdwn(`${until} · run \`${escapeMrkdwn(clip(view.run, 100))}\``)] }
}

/** The message posted when a question opens: the question, its deadline, and how to answer it. */
export function questionMessage(view: QuestionView): { text: string; blocks: KnownBlock[] } {
  const form = formFor(view.fields)
  const elements: Button[] = []
  const ref = encodeRef(view)
  if (view.answerable && form.kind === 'buttons')
    for (const [index, choice] of form.choices.entries())
      elements.push({
        type: 'button',
        action_id: `${ACTION.choose}:${index}`,
        text: plain(choice.label, BUTTON_TEXT),
        value: encodeRef(view, { c: index }),
      })
  if (view.answerable && form.kind === 'modal')
    elements.push({
      type: 'button',
      action_id: ACTION.answer,
      text: plain('Answer…'),
      style: 'primary',
      value: ref,
    })
  // One message for the whole channel: while someone holds the question its button gives it back (their
  // click), and tells anyone else who holds it.
  if (view.answerable)
    elements.push(
      view.holder === undefined
        ? { type: 'button', action_id: ACTION.claim, text: plain('I’m on it', BUTTON_TEXT), value: ref }
        : { type: 'button', action_id: ACTION.release, text: plain('Give it back', BUTTON_TEXT), value: ref },
    )
  elements.push(consoleButton(view.url))
  const blocks = questionBlocks(view, '*A question is waiting*')
  if (view.holder !== undefined)
    blocks.push({ type: 'context', elements: [mrkdwn(holderLine(view.holder).text)] })
  blocks.push(contextLine(view))
  if (view.answerable && form.kind === 'console')
    blocks.push({
      type: 'context',
      elements: [mrkdwn(`Answer this one in the console: ${escapeMrkdwn(form.why)}.`)],
    })
  blocks.push({ type: 'actions', block_id: 'krg:question', elements } satisfies ActionsBlock)
  return {
    text: `A question is waiting in session ${escapeMrkdwn(view.kasmId)}: ${escapeMrkdwn(clip(view.title, 200))}`,
    blocks,
  }
}

/** "*Olivia Operator* is on it since 12:03 UTC" (the time in the reader's zone where Slack can). */
export function holderLine(holder: ClaimNotice): Mrkdwn {
  return md`:raising_hand: *${clip(holder.name, 100)}* is on it since ${new Mrkdwn(slackTime(holder.at))}`
}

/** What the person whose claim lapsed is told, in a direct message. */
export function claimLapsedText(view: { title: string; afterS: number }): Mrkdwn {
  return md`Your claim on “${clip(view.title, 200)}” lapsed after ${view.afterS} s without an answer; the escalation goes on.`
}

/**
 * "Answered by Olivia Operator in Slack · Nights: 2", "Timed out", "Cancelled", "Run ended before an
 * answer".
 */
export function closingLine(closing: Closing, fields: readonly FieldDef[]): Mrkdwn {
  const { who, values } = closingParts(closing, fields)
  if (values.length === 0) return md`${who}`
  return md`${who} · ${Mrkdwn.join(
    values.map(([label, value]) => md`${label}: ${value}`),
    ' · ',
  )}`
}

/** The message once the question closed: as posted, with how it closed, and only the console's button. */
export function closedMessage(view: QuestionView, closing: Closing): { text: string; blocks: KnownBlock[] } {
  const line = closingLine(closing, view.fields)
  const blocks = questionBlocks(view, '*Question closed*')
  blocks.push({ type: 'section', text: mrkdwn(`:white_check_mark: ${line.text}`) })
  blocks.push(contextLine(view))
  blocks.push({ type: 'actions', block_id: 'krg:question', elements: [consoleButton(view.url)] })
  return {
    text: `Question closed in session ${escapeMrkdwn(view.kasmId)}: ${escapeMrkdwn(clip(view.title, 200))}`,
    blocks,
  }
}

/** The reminder, a threaded reply. */
export function reminderText(view: { deadline: string | null }): string {
  return view.deadline === null
    ? '*Reminder:* this question is still open.'
    : `*Reminder:* this question is still open; answer by ${slackDate(view.deadline)}.`
}

/** A handoff, posted when the agent escalates, and its closing. */
export function handoffMessage(
  view: { kasmId: string; team: string; url: string; reason: string },
  endedBy?: string,
): { text: string; blocks: KnownBlock[] } {
  const lead =
    endedBy === undefined
      ? `*Handoff:* the agent asks a person to take over ${sessionLink(view)}`
      : `*Handoff ended* (${escapeMrkdwn(clip(endedBy, 40))}) in ${sessionLink(view)}`
  return {
    text: `${endedBy === undefined ? 'Handoff' : 'Handoff ended'} in session ${escapeMrkdwn(view.kasmId)}`,
    blocks: [
      { type: 'section', text: mrkdwn(`${lead}\n${escapeMrkdwn(clip(view.reason, 1500))}`) },
      { type: 'actions', block_id: 'krg:handoff', elements: [consoleButton(view.url)] },
    ],
  }
}

/** A run that ended needing a person. */
export function runEndedMessage(view: {
  kasmId: string
  team: string
  url: string
  verdict: string | null
  outcome: string | null
}): { text: string; blocks: KnownBlock[] } {
  const what = `verdict ${escapeMrkdwn(view.verdict ?? 'none')}, outcome ${escapeMrkdwn(view.outcome ?? 'none')}`
  return {
    text: `Run ended in session ${escapeMrkdwn(view.kasmId)}: ${escapeMrkdwn(clip(view.verdict ?? 'no verdict', 100))}`,
    blocks: [
      { type: 'section', text: mrkdwn(`*Run ended* in ${sessionLink(view)}: ${what}`) },
      { type: 'actions', block_id: 'krg:run', elements: [consoleButton(view.url)] },
    ],
  }
}

/** An ephemeral reply: one line, and a button when there is somewhere to go. */
export function ephemeral(line: Mrkdwn, button?: { label: string; url: string; primary?: boolean }) {
  const text = line.text
  const blocks: KnownBlock[] = [{ type: 'section', text: mrkdwn(text) }]
  if (button !== undefined)
    blocks.push({
      type: 'actions',
      elements: [
        {
          type: 'button',
          action_id: ACTION.connect,
          text: plain(button.label, BUTTON_TEXT),
          url: button.url,
          ...(button.primary ? { style: 'primary' as const } : {}),
        },
      ],
    })
  return { text: clip(text.replace(/[*_`]/g, ''), 3000), blocks }
}

/**
 * The direct message with the code that links the reader's Slack account to `person` (who signed in to the
 * gateway to do it), and "This is not me". The code is what proves the reader and the person are the same
 * human: the message says whom it makes them, and never to give it to anyone.
 */
export function linkCodeMessage(options: { person: string; code: string; ref: string }): {
  text: string
  blocks: KnownBlock[]
} {
  const shown = `${options.code.slice(0, 4)} ${options.code.slice(4)}`
  const lead = md`*${options.person}* will answer as you in Slack once this code is typed on the gateway's page: *${shown}*`
  const warning = md`Type it only on the page you opened yourself, within 10 minutes. Never give it to anyone: whoever types it makes you answer as ${options.person}. If you did not ask for this, press “This is not me”.`
  return {
    text: clip(lead.text.replace(/\*/g, ''), 3000),
    blocks: [
      { type: 'section', text: mrkdwn(lead.text) },
      { type: 'context', elements: [mrkdwn(warning.text)] },
      {
        type: 'actions',
        block_id: 'krg:link',
        elements: [
          {
            type: 'button',
            action_id: ACTION.notMe,
            text: plain('This is not me', BUTTON_TEXT),
            style: 'danger',
            value: options.ref,
          },
        ],
      },
    ],
  }
}

/** The code's message once its reader said "This is not me". */
export function linkDeclinedMessage(person: string): { text: string; blocks: KnownBlock[] } {
  const line = md`Nothing was linked: you said this was not you, so ${person} will not answer as you. The code no longer works.`
  return { text: clip(line.text, 3000), blocks: [{ type: 'section', text: mrkdwn(line.text) }] }
}

/** The option of a list's `index`th entry: its value is the index, so an option of any length fits. */
function option(text: string, index: number): PlainTextOption {
  return { text: plain(text, OPTION_TEXT), value: String(index) }
}

/** The input block of one field (see {@link formFor} for which fields have one). */
function inputBlock(field: FieldDef): InputBlock {
  const base = {
    type: 'input' as const,
    block_id: `${FIELD_BLOCK}${field.id}`,
    label: plain(labelOf(field), LABEL_TEXT),
    optional: field.required !== true,
    ...(field.help ? { hint: plain(field.help, HINT_TEXT) } : {}),
  }
  const options = (field.enum ?? []).map(option)
  switch (field.type) {
    case 'string': {
      if (field.enum !== undefined) {
        const select = field.enum.length > MAX_RADIOS || field.hint === 'select'
        return {
          ...base,
          element: select
            ? { type: 'static_select', action_id: INPUT_ACTION, options, placeholder: plain('Choose…') }
            : { type: 'radio_buttons', action_id: INPUT_ACTION, options },
        }
      }
      const max = Math.min(field.max_length ?? INPUT_MAX, INPUT_MAX)
      return {
        ...base,
        element: {
          type: 'plain_text_input',
          action_id: INPUT_ACTION,
          multiline: field.max_length === undefined || field.max_length > MULTILINE_OVER,
          max_length: max,
        },
      }
    }
    case 'integer':
    case 'number':
      return {
        ...base,
        element: {
          type: 'number_input',
          action_id: INPUT_ACTION,
          is_decimal_allowed: field.type === 'number',
          ...(field.minimum === undefined ? {} : { min_value: String(field.minimum) }),
          ...(field.maximum === undefined ? {} : { max_value: String(field.maximum) }),
        },
      }
    case 'boolean':
      // Nothing preselected: an untouched question is never answered "No".
      return {
        ...base,
        element: {
          type: 'radio_buttons',
          action_id: INPUT_ACTION,
          options: [
            { text: plain('Yes'), value: 'true' },
            { text: plain('No'), value: 'false' },
          ],
        },
      }
    default: {
      const many = options.length > MAX_RADIOS
      const max = field.max_items
      return {
        ...base,
        element: many
          ? {
              type: 'multi_static_select',
              action_id: INPUT_ACTION,
              options,
              placeholder: plain('Choose…'),
              ...(max !== undefined && max > 0 ? { max_selected_items: max } : {}),
            }
          : { type: 'checkboxes', action_id: INPUT_ACTION, options },
      }
    }
  }
}

/**
 * The "Answer…" modal: one input per field, the question's title and help above; a question with a field
 * Slack cannot hold gets a notice sending the person to the console instead, never part of a form.
 * `channel` and `ts` locate the message it came from (for the replies that follow).
 */
export function answerModal(view: QuestionView, origin: { channel: string; ts: string }): ModalView {
  const form = formFor(view.fields)
  if (form.kind === 'console')
    return noticeModal('Answer in the console', md`This question needs the console: ${form.why}.`, view.url)
  return {
    type: 'modal',
    callback_id: MODAL_CALLBACK,
    private_metadata: encodeRef(view, { ch: origin.channel, ts: origin.ts }),
    title: plain('Answer the question', 24),
    submit: plain('Send', 24),
    close: plain('Cancel', 24),
    blocks: [
      {
        type: 'section',
        text: mrkdwn(
          `*${escapeMrkdwn(clip(view.title, 500))}*${view.help ? `\n${escapeMrkdwn(clip(view.help, 1500))}` : ''}`,
        ),
      },
      ...view.fields.map(inputBlock),
    ],
  }
}

/** A modal that only says something (the result of an answer, or why it cannot be given here). */
export function noticeModal(title: string, text: Mrkdwn, url?: string): ModalView {
  const blocks: KnownBlock[] = [{ type: 'section', text: mrkdwn(text.text) }]
  if (url !== undefined) blocks.push({ type: 'actions', elements: [consoleButton(url)] })
  return { type: 'modal', title: plain(title, 24), close: plain('Close', 24), blocks }
}

/** One input's state in a view submission, as Slack sends it. */
interface InputState {
  value?: string | null
  selected_option?: { value?: unknown } | null
  selected_options?: { value?: unknown }[] | null
}

/**
 * A reply's values from a submitted modal's `view.state.values` (fields left empty are absent), and the
 * problems found reading it (an option that is not one of the field's). Checking the values is fields.ts's.
 */
export function valuesFromState(
  fields: readonly FieldDef[],
  state: unknown,
): { values: Record<string, unknown>; issues: FieldIssue[] } {
  const values: Record<string, unknown> = {}
  const issues: FieldIssue[] = []
  const blocks = typeof state === 'object' && state !== null ? (state as Record<string, unknown>) : {}
  const pick = (list: readonly string[] | undefined, raw: unknown): string | undefined => {
    const index = typeof raw === 'string' && /^\d{1,3}$/.test(raw) ? Number(raw) : -1
    return list?.[index]
  }
  for (const field of fields) {
    const block = blocks[`${FIELD_BLOCK}${field.id}`]
    const input = (
      typeof block === 'object' && block !== null
        ? (block as Record<string, unknown>)[INPUT_ACTION]
        : undefined
    ) as InputState | undefined
    if (input === undefined || input === null) continue
    const bad = (): void => void issues.push({ field: field.id, error: 'not one of the options' })
    switch (field.type) {
      case 'string': {
        if (field.enum !== undefined) {
          if (input.selected_option == null) break
          const chosen = pick(field.enum, input.selected_option.value)
          if (chosen === undefined) bad()
          else values[field.id] = chosen
        } else if (typeof input.value === 'string' && input.value !== '') values[field.id] = input.value
        break
      }
      case 'integer':
      case 'number': {
        if (typeof input.value !== 'string' || input.value.trim() === '') break
        const n = Number(input.value)
        if (Number.isFinite(n)) values[field.id] = n
        else issues.push({ field: field.id, error: 'must be a number' })
        break
      }
      case 'boolean': {
        const v = input.selected_option?.value
        if (v === 'true' || v === 'false') values[field.id] = v === 'true'
        else if (input.selected_option != null) bad()
        break
      }
      case 'string[]': {
        const chosen = (input.selected_options ?? []).map((o) => pick(field.enum, o?.value))
        if (chosen.some((c) => c === undefined)) bad()
        else if (chosen.length > 0) values[field.id] = chosen
        break
      }
      default:
        break
    }
  }
  return { values, issues }
}

/** The `errors` of `response_action: errors`: each problem under its field's input block. */
export function modalErrors(
  fields: readonly FieldDef[],
  issues: readonly FieldIssue[],
): Record<string, string> {
  const ids = new Set(fields.map((f) => f.id))
  const first = fields[0]?.id
  const errors: Record<string, string> = {}
  for (const issue of issues) {
    const id = ids.has(issue.field) ? issue.field : first
    if (id === undefined) continue
    const block = `${FIELD_BLOCK}${id}`
    const text = ids.has(issue.field) ? issue.error : `${issue.field}: ${issue.error}`
    errors[block] = clip(errors[block] === undefined ? text : `${errors[block]}; ${text}`, 150)
  }
  return errors
}
