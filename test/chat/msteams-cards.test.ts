import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  type AdaptiveCard,
  type CardElement,
  claimLapsedCard,
  closedCard,
  closingText,
  executeOf,
  handoffCard,
  linkCodeCard,
  questionCard,
  VERB,
  valuesFromData,
} from '../../src/chat/msteams/cards.ts'
import type { QuestionView } from '../../src/chat/questions.ts'
import type { FieldDef } from '../../src/protocol/fields.ts'

const URL = 'https://gw.example/sessions/k1?run=r1&request=q1'

function view(fields: FieldDef[], more: Partial<QuestionView> = {}): QuestionView {
  return {
    kasmId: 'k1',
    team: 'blue',
    run: 'r1',
    requestId: 'q1',
    revision: 3,
    title: 'How many nights?',
    fields,
    deadline: '2026-12-06T05:00:00.000Z',
    url: URL,
    answerable: true,
    ...more,
  }
}

/** Every element of a card, containers opened. */
function elements(card: AdaptiveCard): CardElement[] {
  const out: CardElement[] = []
  const walk = (list: readonly CardElement[]) => {
    for (const e of list) {
      out.push(e)
      if (e.type === 'Container') walk(e.items)
    }
  }
  walk(card.body)
  return out
}

function inputs(card: AdaptiveCard) {
  return elements(card).filter((e) => e.type.startsWith('Input.')) as Array<CardElement & { id: string }>
}

test('one boolean or one enum of at most five: one Action.Execute per choice, no inputs; always Open in console', () => {
  const yesNo = questionCard(view([{ id: 'ok', type: 'boolean', required: true }]))
  assert.deepEqual(
    yesNo.actions?.map((a) => a.title),
    ['Yes', 'No', 'Open in console'],
  )
  const [yes] = yesNo.actions ?? []
  assert.equal(yes?.type, 'Action.Execute')
  if (yes?.type === 'Action.Execute') {
    assert.equal(yes.verb, VERB.choose)
    assert.deepEqual(yes.data, { k: 'k1', r: 'r1', q: 'q1', v: 3, c: 0 })
    assert.equal(yes.associatedInputs, 'none')
  }
  assert.equal(inputs(yesNo).length, 0)
  const nights = questionCard(view([{ id: 'n', type: 'string', enum: ['1', '2', '3'] }]))
  assert.deepEqual(
    nights.actions?.map((a) => a.title),
    ['1', '2', '3', 'Open in console'],
  )
  assert.equal(nights.actions?.at(-1)?.type, 'Action.OpenUrl')
  assert.equal(nights.version, '1.4')
})

test('other questions: the card holds the inputs (text, number, choice sets, Yes/No unselected) and “Answer”', () => {
  const card = questionCard(
    view([
      { id: 'name', type: 'string', required: true, label: 'Name', max_length: 40 },
      { id: 'notes', type: 'string' },
      { id: 'nights', type: 'integer', minimum: 1, maximum: 14, required: true },
      { id: 'browser', type: 'string', enum: ['firefox', 'chrome'] },
      { id: 'city', type: 'string', enum: Array.from({ length: 12 }, (_, i) => `city${i}`) },
      { id: 'ok', type: 'boolean' },
      { id: 'tags', type: 'string[]', enum: ['a', 'b', 'c'] },
    ]),
  )
  const byId = new Map(inputs(card).map((i) => [i.id, i as Record<string, unknown>]))
  assert.deepEqual(
    [...byId.keys()],
    ['f:name', 'f:notes', 'f:nights', 'f:browser', 'f:city', 'f:ok', 'f:tags'],
  )
  assert.deepEqual(
    { ...byId.get('f:name') },
    {
      type: 'Input.Text',
      id: 'f:name',
      label: 'Name',
      isRequired: true,
      errorMessage: 'Required',
      maxLength: 40,
      isMultiline: false,
    },
  )
  assert.equal(byId.get('f:notes')?.isMultiline, true)
  assert.equal(byId.get('f:notes')?.label, 'notes (optional)')
  assert.equal(byId.get('f:nights')?.type, 'Input.Number')
  assert.equal(byId.get('f:nights')?.min, 1)
  assert.equal(byId.get('f:nights')?.max, 14)
  assert.equal(byId.get('f:browser')?.style, 'expanded')
  assert.equal(byId.get('f:city')?.style, 'compact')
  assert.equal(byId.get('f:ok')?.value, undefined, 'nothing preselected')
  assert.deepEqual(byId.get('f:ok')?.choices, [
    { title: 'Yes', value: 'true' },
    { title: 'No', value: 'false' },
  ])
  assert.equal(byId.get('f:tags')?.isMultiSelect, true)
  const answer = card.actions?.[0]
  assert.equal(answer?.type === 'Action.Execute' && answer.verb, VERB.answer)
  assert.equal(answer?.type === 'Action.Execute' && answer.associatedInputs, 'auto')
  assert.deepEqual(
    card.actions?.map((a) => a.title),
    ['Answer', 'Open in console'],
  )
})

test('a field a card cannot hold: no inputs, no Answer, and the card says to answer in the console', () => {
  for (const fields of [
    [{ id: 'f', type: 'attachment', label: 'Receipt' }],
    [{ id: 'd', type: 'date' }],
  ] as FieldDef[][]) {
    const card = questionCard(view(fields))
    assert.equal(inputs(card).length, 0)
    assert.deepEqual(
      card.actions?.map((a) => a.title),
      ['Open in console'],
    )
    assert.match(
      JSON.stringify(card),
      /Answer this one in the console: .*(asks for a file|Teams cannot show \(date\))/,
    )
  }
})

test('runtime text is data: never in a TextBlock (markdown), a URL or an action other than the console link', () => {
  const evil = '[Reconnect](https://evil.example) **bold** <at>Olivia</at> {{DATE(2020-01-01T00:00:00Z)}}'
  const fields: FieldDef[] = [
    { id: 'x', type: 'string', label: evil, help: evil, enum: [evil, 'b'] },
    { id: 'y', type: 'string', label: evil },
  ]
  const cards = [
    questionCard(
      view(fields, { title: evil, help: evil, kasmId: evil, team: evil, run: evil, deadline: evil }),
      {
        notice: { text: evil, tone: 'attention' },
        issues: [
          { field: 'x', error: evil },
          { field: evil, error: evil },
        ],
      },
    ),
    questionCard(view([{ id: 'n', type: 'string', enum: [evil] }], { title: evil })),
    closedCard(
      view(fields, { title: evil }),
      closingText({ by: 'reply', answerer: { name: evil, sub: 's', at: '' }, values: { x: evil } }, fields),
    ),
    handoffCard({ kasmId: evil, team: evil, url: URL, reason: evil }, evil),
    linkCodeCard({ person: evil, code: '12345678', ref: 'r' }),
    questionCard(view(fields, { title: evil, holder: { sub: 's', name: evil, at: evil } })),
    claimLapsedCard({ title: evil, afterS: 90 }),
  ]
  for (const card of cards) {
    for (const e of elements(card))
      if (e.type === 'TextBlock') assert.ok(!e.text.includes('evil') && !e.text.includes('2020'), e.text)
    for (const a of card.actions ?? []) if (a.type === 'Action.OpenUrl') assert.equal(a.url, URL)
    assert.ok(JSON.stringify(card).includes('evil.example'), 'the text is still shown, as text')
    assert.ok(!('entities' in card))
  }
  // The deadline is the card's DATE function only over the gateway's own instant.
  const ok = JSON.stringify(questionCard(view([{ id: 'n', type: 'boolean' }])))
  assert.match(
    ok,
    /Answer by \{\{DATE\(2026-12-06T05:00:00Z, SHORT\)\}\} at \{\{TIME\(2026-12-06T05:00:00Z\)\}\}/,
  )
})

test('one person’s card: the notice on top, each error under its input, the values given kept', () => {
  const fields: FieldDef[] = [
    { id: 'name', type: 'string', required: true },
    { id: 'nights', type: 'integer' },
  ]
  const card = questionCard(view(fields), {
    notice: { text: 'The run did not accept the answer', tone: 'attention' },
    issues: [
      { field: 'nights', error: 'must be at most 14' },
      { field: '', error: 'the run did not accept this answer' },
    ],
    given: { 'f:name': 'Olivia', 'f:nights': '20' },
  })
  const body = card.body
  assert.equal(body[0]?.type, 'Container')
  const at = body.findIndex((e) => e.type === 'Input.Number')
  const next = body[at + 1]
  assert.equal(next?.type === 'RichTextBlock' && next.id, 'krg-error-nights')
  assert.match(JSON.stringify(next), /must be at most 14/)
  assert.match(JSON.stringify(card), /the run did not accept this answer/)
  const byId = new Map(inputs(card).map((i) => [i.id, i as Record<string, unknown>]))
  assert.equal(byId.get('f:name')?.value, 'Olivia')
  assert.equal(byId.get('f:nights')?.value, 20)
})

test('an invoke’s data back to a reply’s values; options by index; bad ones are issues', () => {
  const fields: FieldDef[] = [
    { id: 'name', type: 'string' },
    { id: 'nights', type: 'integer' },
    { id: 'browser', type: 'string', enum: ['firefox', 'chrome'] },
    { id: 'ok', type: 'boolean' },
    { id: 'tags', type: 'string[]', enum: ['a', 'b', 'c'] },
    { id: 'empty', type: 'string' },
  ]
  assert.deepEqual(
    valuesFromData(fields, {
      'f:name': 'Olivia',
      'f:nights': '2',
      'f:browser': '1',
      'f:ok': 'false',
      'f:tags': '0,2',
      'f:empty': '',
      k: 'k1',
    }),
    { values: { name: 'Olivia', nights: 2, browser: 'chrome', ok: false, tags: ['a', 'c'] }, issues: [] },
  )
  assert.deepEqual(
    valuesFromData(fields, { 'f:nights': 'lots', 'f:browser': '7', 'f:tags': '1,9', 'f:ok': 'maybe' }).issues,
    [
      { field: 'nights', error: 'must be a number' },
      { field: 'browser', error: 'not one of the options' },
      { field: 'ok', error: 'not one of the options' },
      { field: 'tags', error: 'not one of the options' },
    ],
  )
  assert.deepEqual(
    executeOf({
      action: { type: 'Action.Execute', verb: 'krg.answer', data: { k: 'k1' } },
      trigger: 'manual',
    }),
    {
      verb: 'krg.answer',
      data: { k: 'k1' },
    },
  )
  assert.equal(executeOf({ action: { type: 'Action.Submit', verb: 'x' } }), null)
  assert.equal(executeOf('nope'), null)
})

test('“I’m on it” under the question while nobody holds it; the holder’s line and “Give it back” while someone does', () => {
  const claimSet = (card: AdaptiveCard) => {
    const set = card.body.find((e) => e.type === 'ActionSet')
    return set?.type === 'ActionSet' ? set.actions : []
  }
  const free = claimSet(questionCard(view([{ id: 'ok', type: 'boolean' }])))
  assert.deepEqual(
    free.map((a) => a.type === 'Action.Execute' && [a.title, a.verb, a.data]),
    [['I’m on it', VERB.claim, { k: 'k1', r: 'r1', q: 'q1', v: 3 }]],
  )
  const heldCard = questionCard(
    view([{ id: 'ok', type: 'boolean' }], {
      holder: { sub: 'olivia', name: 'Olivia Operator', at: '2026-12-06T04:03:10Z' },
    }),
  )
  assert.deepEqual(
    claimSet(heldCard).map((a) => a.title),
    ['Give it back'],
  )
  const line = heldCard.body.find((e) => e.type === 'RichTextBlock' && e.id === 'krg-holder')
  assert.equal(
    line?.type === 'RichTextBlock' && line.inlines.map((r) => r.text).join(''),
    'Olivia Operator is on it since 04:03 UTC',
  )
  // The card's own actions stay the answers and the console link; nothing to claim where nothing is answered.
  assert.deepEqual(
    heldCard.actions?.map((a) => a.title),
    ['Yes', 'No', 'Open in console'],
  )
  assert.deepEqual(claimSet(questionCard(view([{ id: 'ok', type: 'boolean' }], { answerable: false }))), [])
  assert.equal(claimSet(closedCard(view([]), 'Timed out')).length, 0)
})
