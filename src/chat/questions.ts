import type { Answerer } from '../audit/answers.ts'
import type { ClaimNotice } from '../notify/notification.ts'
import type { FieldDef } from '../protocol/fields.ts'
import type { PostedQuestion } from './messages.ts'

/**
 * What every chat adapter says of a question the same way, whatever its markup: how it can be answered there
 * (buttons, a form, or only the console), what each field takes, which question a button or form names, and
 * how a closed one closed. Adapters render these into their own markup (Slack's mrkdwn, Teams' Adaptive
 * Cards), escaping every runtime string there; nothing here is markup.
 */

/** A question as a chat message shows it: the run's question and where it lives. */
export interface QuestionView extends PostedQuestion {
  readonly kasmId: string
  readonly team: string
  readonly run: string
  readonly requestId: string
  /** The console's view of the session (absolute). */
  readonly url: string
  /** False when the gateway receives no interactions from the platform. */
  readonly answerable: boolean
  /** Who said "I'm on it", and since when; absent while nobody holds it. */
  readonly holder?: ClaimNotice
}

/** How a question can be answered in a chat. */
export type FormKind =
  | { readonly kind: 'buttons'; readonly field: FieldDef; readonly choices: readonly Choice[] }
  | { readonly kind: 'modal' }
  | { readonly kind: 'console'; readonly why: string }

/** One button of a question with a single choice field. */
export interface Choice {
  readonly label: string
  readonly value: string | boolean
}

/** A question closed by a reply: who answered and what, as far as the gateway knows. */
export interface ReplyClosing {
  readonly by: 'reply'
  readonly answerer: Answerer | null
  readonly values: Record<string, unknown> | null
}

/** How a question closed: by a reply, or `timeout`, `cancelled`, `run_ended` (or what a runtime says). */
export type Closing = ReplyClosing | { readonly by: string }

/** What an answer button or form carries back: which question, at which revision. */
export interface QuestionRef {
  readonly kasmId: string
  readonly run: string
  readonly requestId: string
  readonly revision: number
}

/** At most this many choice buttons (Slack's limit for an actions block; Teams shows five well). */
const MAX_BUTTONS = 5
/** At most this many options in a form's list (Slack's static select). */
const MAX_OPTIONS = 100

/** `text` cut to `max` characters (code points), with an ellipsis when cut. */
export function clip(text: string, max: number): string {
  const points = [...text]
  return points.length <= max ? text : `${points.slice(0, max - 1).join('')}…`
}

/** A field's name for a person: its label, else its id. */
export function labelOf(field: FieldDef): string {
  return field.label?.trim() || field.id
}

/**
 * How a question can be answered in a chat (`platform` names it in the reason a field does not fit): one
 * button per choice when it is a single `enum` string (at most five) or a single `boolean`; a form when every
 * field fits one (string, enum up to 100 options, integer, number, boolean, string[] with enum); else only in
 * the console, saying why. A question whose fields did not pass the protocol's checks is never a form.
 */
export function formFor(fields: readonly FieldDef[], platform = 'Slack'): FormKind {
  if (fields.length === 0) return { kind: 'console', why: 'its fields could not be read' }
  const [only] = fields
  if (fields.length === 1 && only !== undefined) {
    if (only.type === 'boolean')
      return {
        kind: 'buttons',
        field: only,
        choices: [
          { label: 'Yes', value: true },
          { label: 'No', value: false },
        ],
      }
    if (only.type === 'string' && only.enum !== undefined && only.enum.length <= MAX_BUTTONS)
      return { kind: 'buttons', field: only, choices: only.enum.map((value) => ({ label: value, value })) }
  }
  for (const field of fields) {
    const why = unfit(field, platform)
    if (why !== null) return { kind: 'console', why }
  }
  return { kind: 'modal' }
}

/** Why a field does not fit a chat's form, or null when it does. */
function unfit(field: FieldDef, platform: string): string | null {
  const name = `“${labelOf(field)}”`
  switch (field.type) {
    case 'string':
    case 'string[]':
      if (field.type === 'string[]' && field.enum === undefined) return `${name} has no options`
      if ((field.enum?.length ?? 0) > MAX_OPTIONS) return `${name} has more than ${MAX_OPTIONS} options`
      return null
    case 'integer':
    case 'number':
    case 'boolean':
      return null
    case 'attachment':
      return `${name} asks for a file`
    default:
      return `${name} is of a kind ${platform} cannot show (${String((field as { type: unknown }).type)})`
  }
}

/** What a field takes, in words (plain text: the caller escapes for its markup). */
export function describe(field: FieldDef, options: (list: readonly string[]) => string): string {
  const range = (): string => {
    const { minimum: lo, maximum: hi } = field
    if (lo !== undefined && hi !== undefined) return `, ${lo} to ${hi}`
    if (lo !== undefined) return `, at least ${lo}`
    if (hi !== undefined) return `, at most ${hi}`
    return ''
  }
  switch (field.type) {
    case 'string':
      return field.enum !== undefined ? `one of ${options(field.enum)}` : 'text'
    case 'integer':
      return `a whole number${range()}`
    case 'number':
      return `a number${range()}`
    case 'boolean':
      return 'yes or no'
    case 'string[]':
      return `some of ${options(field.enum ?? [])}`
    case 'attachment':
      return 'a file'
    default:
      return String((field as { type: unknown }).type)
  }
}

/** The value of a reply's field as a person reads it. */
export function shown(field: FieldDef | undefined, value: unknown): string {
  if (typeof value === 'boolean') return value ? 'Yes' : 'No'
  if (Array.isArray(value)) return value.map((v) => String(v)).join(', ')
  if (field?.type === 'attachment') return 'a file'
  return String(value)
}

/** The encoded value of an answer button or a form's metadata. */
export function encodeRef(ref: QuestionRef, extra: Record<string, string | number> = {}): string {
  return JSON.stringify({ k: ref.kasmId, r: ref.run, q: ref.requestId, v: ref.revision, ...extra })
}

/** The question a button's value or a form's metadata names, and its extra members; null when malformed. */
export function decodeRef(raw: unknown): (QuestionRef & { extra: Record<string, unknown> }) | null {
  if (typeof raw !== 'string' || raw.length > 3000) return null
  let value: unknown
  try {
    value = JSON.parse(raw)
  } catch {
    return null
  }
  return refOf(value)
}

/** The question an already parsed object names (`{k, r, q, v, …}`), and its other members; null if not. */
export function refOf(value: unknown): (QuestionRef & { extra: Record<string, unknown> }) | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null
  const { k, r, q, v, ...extra } = value as Record<string, unknown>
  if (typeof k !== 'string' || typeof r !== 'string' || typeof q !== 'string' || !Number.isSafeInteger(v))
    return null
  if (k.length > 200 || r.length > 200 || q.length > 200) return null
  return { kasmId: k, run: r, requestId: q, revision: v as number, extra }
}

/** The chats an answer can come from, as a closing names them ("Answered by … in Slack"). */
const CHAT_NAMES: Readonly<Record<string, string>> = { slack: 'Slack', msteams: 'Teams' }

/**
 * A closing in parts, unescaped: `who` ("Answered by Olivia Operator in Teams", "Timed out: …") and, for a
 * reply whose values are known, each field's name and value. Adapters escape and join them.
 */
export function closingParts(
  closing: Closing,
  fields: readonly FieldDef[],
): { readonly who: string; readonly values: readonly (readonly [string, string])[] } {
  if (closing.by !== 'reply') {
    const how: Record<string, string> = {
      timeout: 'Timed out: nobody answered in time',
      cancelled: 'Cancelled',
      run_ended: 'Run ended before an answer',
    }
    return { who: how[closing.by] ?? `Closed (${clip(closing.by, 40)})`, values: [] }
  }
  const { answerer, values } = closing as ReplyClosing
  const where = answerer?.via === undefined ? undefined : CHAT_NAMES[answerer.via]
  const who =
    answerer === null
      ? 'Answered'
      : `Answered by ${clip(answerer.name, 100)}${where === undefined ? '' : ` in ${where}`}`
  const parts = Object.entries(values ?? {}).map(([id, value]) => {
    const field = fields.find((f) => f.id === id)
    return [clip(field === undefined ? id : labelOf(field), 60), clip(shown(field, value), 200)] as const
  })
  return { who, values: parts }
}

/** How a question that is no longer open closed, in words ("it timed out"), when the closing is known. */
export function closedHow(closedBy: string | null): string | undefined {
  const how: Record<string, string> = {
    timeout: 'it timed out',
    cancelled: 'it was cancelled',
    run_ended: 'the run ended',
  }
  return closedBy === null ? undefined : how[closedBy]
}
