import type { IAdaptiveCard } from '@microsoft/teams.cards'
import type { FieldDef, FieldIssue } from '../../protocol/fields.ts'
import {
  type Closing,
  clip,
  closingParts,
  describe,
  formFor,
  labelOf,
  type QuestionRef,
  type QuestionView,
  refOf,
} from '../questions.ts'

/**
 * Adaptive Cards for Microsoft Teams, as pure functions over plain typed objects (narrower than Microsoft's
 * `@microsoft/teams.cards` types, which they are checked against below): a question's card (choice buttons, or the inputs and "Answer"),
 * its closing, the card one person gets back from a click (a notice, the field errors next to their inputs),
 * handoffs, run ends, reminders and the direct card with a link code; and the way back from an
 * `Action.Execute`'s data to a reply's values.
 *
 * Runtime text is data: it goes only into places Teams does not read as markdown (a `TextRun` of a
 * `RichTextBlock`, an input's label, a choice's title, an action's title), never into a `TextBlock` (whose
 * text is markdown), a URL or a mention (the gateway never sends mention entities). `TextBlock`s hold the
 * gateway's fixed sentences only; a deadline is formatted by the card's own `DATE`/`TIME` functions from an
 * instant the gateway wrote itself.
 */

/** A text run: plain text, never markdown. */
export interface TextRun {
  readonly type: 'TextRun'
  readonly text: string
  readonly weight?: 'Bolder'
  readonly size?: 'Medium' | 'Large'
  readonly color?: 'Attention' | 'Good' | 'Warning' | 'Accent'
  readonly isSubtle?: boolean
}

/** A card element the gateway uses. */
export type CardElement =
  | {
      readonly type: 'TextBlock'
      readonly text: string
      readonly wrap: true
      readonly weight?: 'Bolder'
      readonly isSubtle?: boolean
    }
  | { readonly type: 'RichTextBlock'; readonly inlines: TextRun[]; readonly id?: string }
  | {
      readonly type: 'Container'
      readonly items: CardElement[]
      readonly style?: 'attention' | 'good' | 'warning' | 'emphasis'
      readonly id?: string
    }
  | { readonly type: 'ActionSet'; readonly actions: CardAction[]; readonly id?: string }
  | CardInput

/** An input of a question's card. */
export type CardInput =
  | {
      readonly type: 'Input.Text'
      readonly id: string
      readonly label: string
      readonly isRequired: boolean
      readonly errorMessage?: string
      readonly maxLength?: number
      readonly isMultiline: boolean
      readonly value?: string
    }
  | {
      readonly type: 'Input.Number'
      readonly id: string
      readonly label: string
      readonly isRequired: boolean
      readonly errorMessage?: string
      readonly min?: number
      readonly max?: number
      readonly value?: number
    }
  | {
      readonly type: 'Input.ChoiceSet'
      readonly id: string
      readonly label: string
      readonly isRequired: boolean
      readonly errorMessage?: string
      readonly style: 'compact' | 'expanded'
      readonly isMultiSelect: boolean
      readonly choices: { readonly title: string; readonly value: string }[]
      readonly value?: string
    }

/** An action of a card: a Universal Action (answered by the bot) or a link. */
export type CardAction =
  | {
      readonly type: 'Action.Execute'
      readonly title: string
      readonly verb: string
      readonly data: Record<string, string | number>
      readonly associatedInputs: 'auto' | 'none'
      readonly style?: 'positive' | 'destructive'
    }
  | { readonly type: 'Action.OpenUrl'; readonly title: string; readonly url: string }

/** An Adaptive Card as Teams takes it (version 1.4: Universal Actions in Teams). */
export interface AdaptiveCard {
  readonly type: 'AdaptiveCard'
  readonly $schema: 'http://adaptivecards.io/schemas/adaptive-card.json'
  readonly version: '1.4'
  readonly body: CardElement[]
  readonly actions?: CardAction[]
  readonly msteams: { readonly width: 'full' }
}

/**
 * A card as Microsoft's Teams SDK types it (`IAdaptiveCard`): this compiles only while every card of ours is
 * one the SDK's schema takes, which is the point of it.
 */
export const asSdkCard = (card: AdaptiveCard): IAdaptiveCard => card

/** The content type of an Adaptive Card attachment and of an invoke's card answer. */
export const CARD_CONTENT_TYPE = 'application/vnd.microsoft.card.adaptive'

/** The verbs of the gateway's `Action.Execute`s. */
export const VERB = {
  /** A choice button: its data carries the question and the choice's index (`c`). */
  choose: 'krg.choose',
  /** "Answer" under the inputs: its data carries the question, the inputs add their values. */
  answer: 'krg.answer',
  /** "This is not me" on the direct card with a link code: its data names the pending link (`ref`). */
  notMe: 'krg.not-me',
  /** "I'm on it", beside the answers while nobody holds the question: its data carries the question. */
  claim: 'krg.claim',
  /** "Give it back", in its place while someone holds it. */
  release: 'krg.release',
} as const

/** The id prefix of a field's input: the invoke's data holds `f:<field id>`. */
const INPUT_PREFIX = 'f:'
// What Teams renders well; far under its 28 KB card limit with 32 fields.
const TITLE_MAX = 500
const HELP_MAX = 1500
const LABEL_MAX = 200
const CHOICE_MAX = 100
const INPUT_MAX = 4000
/** A string field gets a multi-line input when it may be longer than this. */
const MULTILINE_OVER = 200
/** A list of more options than this is a compact (drop-down) choice set. */
const EXPANDED_MAX = 10

/** Something one person is told on the card a click gave back. */
export interface Notice {
  readonly text: string
  readonly tone: 'attention' | 'good' | 'warning'
  /** A link the person should follow (connect their account). */
  readonly link?: { readonly title: string; readonly url: string }
}

/** What one person's card shows beside the question: a notice, field errors, the values they gave. */
export interface PersonalView {
  readonly notice?: Notice
  readonly issues?: readonly FieldIssue[]
  /** The invoke's data as the person sent it: their inputs keep what they typed. */
  readonly given?: Record<string, unknown>
}

const run = (text: string, more: Omit<TextRun, 'type' | 'text'> = {}): TextRun => ({
  type: 'TextRun',
  text,
  ...more,
})
const fixed = (text: string, more: { weight?: 'Bolder'; isSubtle?: boolean } = {}): CardElement => ({
  type: 'TextBlock',
  text,
  wrap: true,
  ...more,
})
const rich = (...inlines: TextRun[]): CardElement => ({ type: 'RichTextBlock', inlines })

function card(body: CardElement[], actions: CardAction[]): AdaptiveCard {
  return {
    type: 'AdaptiveCard',
    $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
    version: '1.4',
    body,
    ...(actions.length === 0 ? {} : { actions }),
    msteams: { width: 'full' },
  }
}

const openInConsole = (url: string): CardAction => ({ type: 'Action.OpenUrl', title: 'Open in console', url })

/** "Session k1 (team blue) · run r1", every id a text run. */
function where(view: { kasmId: string; team: string; run?: string }): CardElement {
  const inlines = [
    run('Session '),
    run(view.kasmId, { weight: 'Bolder' }),
    run(' (team '),
    run(view.team),
    run(')'),
  ]
  if (view.run !== undefined) inlines.push(run(' · run '), run(clip(view.run, 100)))
  return { type: 'RichTextBlock', inlines }
}

/**
 * The deadline line: formatted by the card in the reader's time zone from an instant the gateway wrote (a
 * deadline that is not a date is shown as the runtime wrote it, as data).
 */
function deadlineLine(deadline: string | null): CardElement {
  if (deadline === null) return fixed('No deadline', { isSubtle: true })
  const ms = Date.parse(deadline)
  if (Number.isNaN(ms))
    return rich(run('Answer by ', { isSubtle: true }), run(clip(deadline, 60), { isSubtle: true }))
  const at = new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')
  return fixed(`Answer by {{DATE(${at}, SHORT)}} at {{TIME(${at})}}`, { isSubtle: true })
}

/** The question itself: title (bold) and help. */
function asked(view: { title: string; help?: string }): CardElement[] {
  const out = [rich(run(clip(view.title, TITLE_MAX), { weight: 'Bolder', size: 'Medium' }))]
  if (view.help) out.push(rich(run(clip(view.help, HELP_MAX))))
  return out
}

/** One line per field: its name and what it takes (for a question answered in the console). */
function fieldLines(fields: readonly FieldDef[]): CardElement[] {
  return fields.map((f) =>
    rich(
      run('• '),
      run(clip(labelOf(f), LABEL_MAX), { weight: 'Bolder' }),
      run(`${f.required ? '' : ' (optional)'}: `),
      run(describe(f, (list) => clip(list.join(', '), 300))),
    ),
  )
}

/** The data of an action about the question `ref`. */
function refData(
  ref: QuestionRef,
  extra: Record<string, string | number> = {},
): Record<string, string | number> {
  return { k: ref.kasmId, r: ref.run, q: ref.requestId, v: ref.revision, ...extra }
}

function noticeBlock(notice: Notice): CardElement {
  const color = notice.tone === 'good' ? 'Good' : notice.tone === 'warning' ? 'Warning' : 'Attention'
  return {
    type: 'Container',
    id: 'krg-notice',
    style: notice.tone,
    items: [rich(run(notice.text, { color, weight: 'Bolder' }))],
  }
}

/** The raw value a person gave for `field` (the invoke's data), for their input to keep. */
function givenOf(given: Record<string, unknown> | undefined, field: FieldDef): string | undefined {
  const raw = given?.[`${INPUT_PREFIX}${field.id}`]
  if (typeof raw === 'number' && Number.isFinite(raw)) return String(raw)
  return typeof raw === 'string' ? clip(raw, INPUT_MAX) : undefined
}

/** The input of one field (see formFor for which fields have one); `value` what the person gave before. */
function inputOf(field: FieldDef, value: string | undefined): CardInput {
  const base = {
    id: `${INPUT_PREFIX}${field.id}`,
    label: `${clip(labelOf(field), LABEL_MAX)}${field.required ? '' : ' (optional)'}`,
    isRequired: field.required === true,
    ...(field.required ? { errorMessage: 'Required' } : {}),
  }
  const choices = (list: readonly string[]) =>
    list.map((title, index) => ({ title: clip(title, CHOICE_MAX), value: String(index) }))
  switch (field.type) {
    case 'string': {
      if (field.enum !== undefined)
        return {
          type: 'Input.ChoiceSet',
          ...base,
          style: field.enum.length > EXPANDED_MAX || field.hint === 'select' ? 'compact' : 'expanded',
          isMultiSelect: false,
          choices: choices(field.enum),
          ...(value === undefined ? {} : { value }),
        }
      const max = Math.min(field.max_length ?? INPUT_MAX, INPUT_MAX)
      return {
        type: 'Input.Text',
        ...base,
        maxLength: max,
        isMultiline: field.max_length === undefined || field.max_length > MULTILINE_OVER,
        ...(value === undefined ? {} : { value }),
      }
    }
    case 'integer':
    case 'number': {
      const n = value === undefined ? Number.NaN : Number(value)
      return {
        type: 'Input.Number',
        ...base,
        ...(field.minimum === undefined ? {} : { min: field.minimum }),
        ...(field.maximum === undefined ? {} : { max: field.maximum }),
        ...(Number.isFinite(n) ? { value: n } : {}),
      }
    }
    case 'boolean':
      // Nothing preselected: an untouched question is never answered "No".
      return {
        type: 'Input.ChoiceSet',
        ...base,
        style: 'expanded',
        isMultiSelect: false,
        choices: [
          { title: 'Yes', value: 'true' },
          { title: 'No', value: 'false' },
        ],
        ...(value === undefined ? {} : { value }),
      }
    default:
      return {
        type: 'Input.ChoiceSet',
        ...base,
        style: (field.enum?.length ?? 0) > EXPANDED_MAX ? 'compact' : 'expanded',
        isMultiSelect: true,
        choices: choices(field.enum ?? []),
        ...(value === undefined ? {} : { value }),
      }
  }
}

/** Each issue next to its field's input; those naming no field of the question, in a line of their own. */
function issuesByField(fields: readonly FieldDef[], issues: readonly FieldIssue[]) {
  const ids = new Set(fields.map((f) => f.id))
  const byField = new Map<string, string[]>()
  const loose: string[] = []
  for (const issue of issues) {
    if (ids.has(issue.field)) byField.set(issue.field, [...(byField.get(issue.field) ?? []), issue.error])
    else loose.push(issue.field === '' ? issue.error : `${issue.field}: ${issue.error}`)
  }
  return { byField, loose }
}

/**
 * A question's card: what is asked, in which session and run, the deadline, and how to answer it here
 * (choice buttons, or the inputs and "Answer", or why only the console can); always "Open in console".
 * With `personal`, the card one person gets back from a click: a notice on top, the field errors under
 * their inputs, the values they gave kept.
 */
export function questionCard(view: QuestionView, personal: PersonalView = {}): AdaptiveCard {
  const form = formFor(view.fields, 'Teams')
  const body: CardElement[] = []
  if (personal.notice !== undefined) body.push(noticeBlock(personal.notice))
  body.push(fixed('A question is waiting', { weight: 'Bolder' }), where(view), ...asked(view))
  const actions: CardAction[] = []
  if (view.answerable && form.kind === 'buttons')
    form.choices.forEach((choice, index) => {
      actions.push({
        type: 'Action.Execute',
        title: clip(choice.label, CHOICE_MAX),
        verb: VERB.choose,
        data: refData(view, { c: index }),
        associatedInputs: 'none',
      })
    })
  const { byField, loose } = issuesByField(view.fields, personal.issues ?? [])
  if (view.answerable && form.kind === 'modal') {
    for (const field of view.fields) {
      body.push(inputOf(field, givenOf(personal.given, field)))
      if (field.help) body.push(rich(run(clip(field.help, HELP_MAX), { isSubtle: true })))
      const errors = byField.get(field.id)
      if (errors !== undefined)
        body.push({
          type: 'RichTextBlock',
          id: `krg-error-${field.id}`,
          inlines: [run(clip(errors.join('; '), 500), { color: 'Attention' })],
        })
    }
    actions.push({
      type: 'Action.Execute',
      title: 'Answer',
      verb: VERB.answer,
      data: refData(view),
      associatedInputs: 'auto',
      style: 'positive',
    })
  } else if (form.kind !== 'buttons' && view.fields.length > 0) body.push(...fieldLines(view.fields))
  if (loose.length > 0)
    body.push({
      type: 'RichTextBlock',
      id: 'krg-error',
      inlines: [run(clip(loose.join('; '), 1000), { color: 'Attention' })],
    })
  body.push(deadlineLine(view.deadline))
  if (view.answerable && form.kind === 'console')
    body.push(rich(run('Answer this one in the console: '), run(`${form.why}.`)))
  if (view.answerable) body.push(...claimBlock(view))
  if (personal.notice?.link !== undefined)
    actions.push({ type: 'Action.OpenUrl', title: personal.notice.link.title, url: personal.notice.link.url })
  actions.push(openInConsole(view.url))
  return card(body, actions)
}

/**
 * Who holds the question and the button beside it: "I'm on it" while nobody does, "Give it back" while
 * someone does (only the holder's click gives it back; anyone else's is told who holds it). In the body, not
 * among the card's actions, which five choice buttons and "Open in console" already fill.
 */
function claimBlock(view: QuestionView): CardElement[] {
  const out: CardElement[] = []
  if (view.holder !== undefined) out.push(holderLine(view.holder))
  out.push({
    type: 'ActionSet',
    id: 'krg-claim',
    actions: [
      view.holder === undefined
        ? {
            type: 'Action.Execute',
            title: 'I’m on it',
            verb: VERB.claim,
            data: refData(view),
            associatedInputs: 'none',
          }
        : {
            type: 'Action.Execute',
            title: 'Give it back',
            verb: VERB.release,
            data: refData(view),
            associatedInputs: 'none',
          },
    ],
  })
  return out
}

/** "Olivia Operator is on it since 12:03 UTC": the name a text run, the time the gateway's own. */
export function holderLine(holder: { name: string; at: string }): CardElement {
  return {
    type: 'RichTextBlock',
    id: 'krg-holder',
    inlines: [
      run(clip(holder.name, 100), { weight: 'Bolder' }),
      run(` is on it since ${sinceOf(holder.at)}`),
    ],
  }
}

/** `HH:MM UTC` of an instant (a time that is not one, as written, clipped). */
export function sinceOf(at: string): string {
  const ms = Date.parse(at)
  return Number.isNaN(ms) ? clip(at, 40) : `${new Date(ms).toISOString().slice(11, 16)} UTC`
}

/** "Answered by Olivia Operator in Teams · Nights: 2", "Timed out: nobody answered in time", … (plain). */
export function closingText(closing: Closing, fields: readonly FieldDef[]): string {
  const { who, values } = closingParts(closing, fields)
  return [who, ...values.map(([label, value]) => `${label}: ${value}`)].join(' · ')
}

/** The card once the question closed, for everyone: as posted, how it closed, and only "Open in console". */
export function closedCard(view: QuestionView, line: string, notice?: Notice): AdaptiveCard {
  const body: CardElement[] = []
  if (notice !== undefined) body.push(noticeBlock(notice))
  body.push(fixed('Question closed', { weight: 'Bolder' }), where(view), ...asked(view))
  body.push({ type: 'RichTextBlock', id: 'krg-closing', inlines: [run(clip(line, 2000), { color: 'Good' })] })
  body.push(deadlineLine(view.deadline))
  return card(body, [openInConsole(view.url)])
}

/** What the person whose claim lapsed is told, in their 1:1 chat with the bot. */
export function claimLapsedCard(view: { title: string; afterS: number }): AdaptiveCard {
  return card(
    [
      rich(
        run('Your claim on “'),
        run(clip(view.title, 200), { weight: 'Bolder' }),
        run(`” lapsed after ${view.afterS} s without an answer; the escalation goes on.`),
      ),
    ],
    [],
  )
}

/** The reminder, a reply under the question's card. */
export function reminderCard(deadline: string | null): AdaptiveCard {
  return card(
    [fixed('Reminder: this question is still open.', { weight: 'Bolder' }), deadlineLine(deadline)],
    [],
  )
}

/** A handoff, posted when the agent escalates, and (with `endedBy`) its closing. */
export function handoffCard(
  view: { kasmId: string; team: string; url: string; reason: string },
  endedBy?: string,
): AdaptiveCard {
  const lead =
    endedBy === undefined
      ? rich(run('Handoff: ', { weight: 'Bolder' }), run('the agent asks a person to take over'))
      : rich(run('Handoff ended', { weight: 'Bolder' }), run(' ('), run(clip(endedBy, 40)), run(')'))
  const body = [lead, where(view)]
  if (view.reason !== '') body.push(rich(run(clip(view.reason, HELP_MAX))))
  return card(body, [openInConsole(view.url)])
}

/** A run that ended needing a person. */
export function runEndedCard(view: {
  kasmId: string
  team: string
  url: string
  verdict: string | null
  outcome: string | null
}): AdaptiveCard {
  return card(
    [
      fixed('Run ended', { weight: 'Bolder' }),
      where(view),
      rich(
        run('Verdict '),
        run(clip(view.verdict ?? 'none', 100)),
        run(', outcome '),
        run(clip(view.outcome ?? 'none', 100)),
      ),
    ],
    [openInConsole(view.url)],
  )
}

/**
 * The direct card with the code that links the reader's Teams account to `person` (who signed in to the
 * gateway to do it), and "This is not me": the code proves the reader and the person are the same human, so
 * the card says whom it makes them, and never to give it to anyone.
 */
export function linkCodeCard(options: { person: string; code: string; ref: string }): AdaptiveCard {
  const shownCode = `${options.code.slice(0, 4)} ${options.code.slice(4)}`
  return card(
    [
      rich(
        run(options.person, { weight: 'Bolder' }),
        run(" will answer as you in Teams once this code is typed on the gateway's page: "),
        run(shownCode, { weight: 'Bolder', size: 'Large' }),
      ),
      rich(
        run(
          'Type it only on the page you opened yourself, within 10 minutes. Never give it to anyone: whoever types it makes you answer as ',
          { isSubtle: true },
        ),
        run(options.person, { isSubtle: true }),
        run('. If you did not ask for this, press “This is not me”.', { isSubtle: true }),
      ),
    ],
    [
      {
        type: 'Action.Execute',
        title: 'This is not me',
        verb: VERB.notMe,
        data: { ref: options.ref },
        associatedInputs: 'none',
        style: 'destructive',
      },
    ],
  )
}

/** The code's card once its reader said "This is not me". */
export function linkDeclinedCard(person: string): AdaptiveCard {
  return card(
    [
      rich(
        run('Nothing was linked: you said this was not you, so '),
        run(person),
        run(' will not answer as you. The code no longer works.'),
      ),
    ],
    [],
  )
}

/** A card that only says something (an invoke the gateway cannot act on). */
export function noticeCard(notice: Notice): AdaptiveCard {
  const actions: CardAction[] =
    notice.link === undefined
      ? []
      : [{ type: 'Action.OpenUrl', title: notice.link.title, url: notice.link.url }]
  return card([noticeBlock(notice)], actions)
}

/** What an `Action.Execute` carried: its verb and data (the inputs' values merged in). */
export interface ExecuteAction {
  readonly verb: string
  readonly data: Record<string, unknown>
}

/** The `Action.Execute` of an `adaptiveCard/action` invoke's value; null when it is not one. */
export function executeOf(value: unknown): ExecuteAction | null {
  if (typeof value !== 'object' || value === null) return null
  const action = (value as { action?: unknown }).action
  if (typeof action !== 'object' || action === null) return null
  const { type, verb, data } = action as Record<string, unknown>
  if (type !== 'Action.Execute' || typeof verb !== 'string' || verb.length > 64) return null
  const fields =
    typeof data === 'object' && data !== null && !Array.isArray(data) ? (data as Record<string, unknown>) : {}
  return { verb, data: fields }
}

/** The question an action's data names (and its other members), or null. */
export function actionRef(data: Record<string, unknown>) {
  return refOf(data)
}

/**
 * A reply's values from an "Answer"'s data (the inputs Teams merged in; fields left empty are absent), and
 * the problems found reading it (an option that is not one of the field's, a number that is not one).
 * Checking the values is fields.ts's.
 */
export function valuesFromData(
  fields: readonly FieldDef[],
  data: Record<string, unknown>,
): { values: Record<string, unknown>; issues: FieldIssue[] } {
  const values: Record<string, unknown> = {}
  const issues: FieldIssue[] = []
  const pick = (list: readonly string[] | undefined, raw: string): string | undefined => {
    const index = /^\d{1,3}$/.test(raw.trim()) ? Number(raw.trim()) : -1
    return list?.[index]
  }
  for (const field of fields) {
    const raw = data[`${INPUT_PREFIX}${field.id}`]
    const text =
      typeof raw === 'number' && Number.isFinite(raw) ? String(raw) : typeof raw === 'string' ? raw : ''
    if (text === '') continue
    const bad = (): void => void issues.push({ field: field.id, error: 'not one of the options' })
    switch (field.type) {
      case 'string': {
        if (field.enum === undefined) values[field.id] = text
        else {
          const chosen = pick(field.enum, text)
          if (chosen === undefined) bad()
          else values[field.id] = chosen
        }
        break
      }
      case 'integer':
      case 'number': {
        const n = text.trim() === '' ? Number.NaN : Number(text)
        if (Number.isFinite(n)) values[field.id] = n
        else issues.push({ field: field.id, error: 'must be a number' })
        break
      }
      case 'boolean':
        if (text === 'true' || text === 'false') values[field.id] = text === 'true'
        else bad()
        break
      case 'string[]': {
        const chosen = text.split(',').map((part) => pick(field.enum, part))
        if (chosen.some((c) => c === undefined)) bad()
        else values[field.id] = chosen
        break
      }
      default:
        break
    }
  }
  return { values, issues }
}
