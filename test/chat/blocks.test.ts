import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  answerModal,
  clip,
  closedMessage,
  closingLine,
  decodeRef,
  encodeRef,
  escapeMrkdwn,
  formFor,
  handoffMessage,
  modalErrors,
  type QuestionView,
  questionMessage,
  runEndedMessage,
  slackDate,
  valuesFromState,
} from '../../src/chat/slack/blocks.ts'
import type { FieldDef } from '../../src/protocol/fields.ts'

/** The Block Kit builders are pure: what they make from a question, and what they read back from a modal. */

function view(fields: FieldDef[], extra: Partial<QuestionView> = {}): QuestionView {
  return {
    kasmId: 'k1',
    team: 'blue',
    run: 'r1',
    requestId: 'q1',
    revision: 2,
    title: 'Which one?',
    fields,
    deadline: '2026-12-01T12:05:00.000Z',
    url: 'https://gw.example/sessions/k1',
    answerable: true,
    ...extra,
  }
}

test('formFor: buttons for one enum of at most five or one boolean, a modal for what fits, the console for the rest', () => {
  const five = ['a', 'b', 'c', 'd', 'e']
  assert.equal(formFor([{ id: 'x', type: 'string', enum: five }]).kind, 'buttons')
  assert.equal(formFor([{ id: 'x', type: 'string', enum: [...five, 'f'] }]).kind, 'modal')
  assert.deepEqual(formFor([{ id: 'ok', type: 'boolean' }]), {
    kind: 'buttons',
    field: { id: 'ok', type: 'boolean' },
    choices: [
      { label: 'Yes', value: true },
      { label: 'No', value: false },
    ],
  })
  // Two fields are never buttons, even two booleans.
  assert.equal(
    formFor([
      { id: 'a', type: 'boolean' },
      { id: 'b', type: 'boolean' },
    ]).kind,
    'modal',
  )
  assert.equal(formFor([{ id: 's', type: 'string' }]).kind, 'modal')
  const hundred = Array.from({ length: 100 }, (_, i) => `o${i}`)
  assert.equal(formFor([{ id: 's', type: 'string', enum: hundred }]).kind, 'modal')
  assert.equal(formFor([{ id: 'l', type: 'string[]', enum: hundred }]).kind, 'modal')
  const console = (fields: FieldDef[]) => {
    const form = formFor(fields)
    return form.kind === 'console' ? form.why : form.kind
  }
  assert.equal(
    console([{ id: 's', type: 'string', enum: [...hundred, 'x'] }]),
    '“s” has more than 100 options',
  )
  assert.equal(console([{ id: 'f', type: 'attachment', label: 'Receipt' }]), '“Receipt” asks for a file')
  // One field Slack cannot hold sends the whole question to the console: never part of a form.
  assert.equal(
    console([
      { id: 'n', type: 'integer' },
      { id: 'd', type: 'date' as FieldDef['type'] },
    ]),
    '“d” is of a kind Slack cannot show (date)',
  )
  assert.equal(console([]), 'its fields could not be read')
})

test('the message: escaped text, a choice per button with its index, the deadline in Slack’s date format', () => {
  const message = questionMessage(
    view([{ id: 'x', type: 'string', enum: ['<b>a</b>', 'b & c'] }], { title: '*Bold* <@U123> & <!here>' }),
  )
  const json = JSON.stringify(message.blocks)
  assert.ok(!json.includes('<@U123>') && !json.includes('<!here>'), 'no mention, no ping')
  assert.ok(json.includes('&lt;@U123&gt; &amp; &lt;!here&gt;'))
  const actions = message.blocks.find((b) => b.type === 'actions') as unknown as {
    elements: Record<string, unknown>[]
  }
  // A choice's label is plain text: Slack shows it as written, nothing in it is markup.
  assert.ok(actions.elements.every((e) => (e.text as { type: string }).type === 'plain_text'))
  assert.deepEqual(
    actions.elements.map((e) => [e.action_id, (e.text as { text: string }).text, e.value ?? e.url]),
    [
      ['krg:choose:0', '<b>a</b>', encodeRef(view([]), { c: 0 })],
      ['krg:choose:1', 'b & c', encodeRef(view([]), { c: 1 })],
      ['krg:claim', 'I’m on it', encodeRef(view([]))],
      ['krg:console', 'Open in console', 'https://gw.example/sessions/k1'],
    ],
  )
  // Held: the holder and since when above the deadline, and "Give it back" in the claim's place.
  const held = questionMessage(
    view([{ id: 'ok', type: 'boolean' }], {
      holder: { sub: 'olivia', name: 'Olivia <@U1> Operator', at: '2026-12-01T12:03:09.000Z' },
    }),
  )
  const contexts = held.blocks.filter((b) => b.type === 'context').map((b) => JSON.stringify(b))
  assert.ok(
    contexts[0]?.includes(
      ':raising_hand: *Olivia &lt;@U1&gt; Operator* is on it since <!date^1796126589^{time}|12:03 UTC>',
    ),
    contexts[0],
  )
  assert.match(contexts[1] ?? '', /Answer by/)
  const heldActions = held.blocks.find((b) => b.type === 'actions') as unknown as {
    elements: { action_id: string; text: { text: string } }[]
  }
  assert.deepEqual(
    heldActions.elements.map((e) => [e.action_id, e.text.text]),
    [
      ['krg:choose:0', 'Yes'],
      ['krg:choose:1', 'No'],
      ['krg:release', 'Give it back'],
      ['krg:console', 'Open in console'],
    ],
  )
  assert.ok(json.includes('<!date^1796126700^{date_short_pretty} at {time}|2026-12-01 12:05 UTC>'))
  // Without a way for answers to come back, only the console.
  const quiet = questionMessage(view([{ id: 'ok', type: 'boolean' }], { answerable: false }))
  const only = quiet.blocks.find((b) => b.type === 'actions') as unknown as {
    elements: { action_id: string }[]
  }
  assert.deepEqual(
    only.elements.map((e) => e.action_id),
    ['krg:console'],
  )
})

test('refs round-trip, and anything malformed is null', () => {
  const ref = { kasmId: 'k1', run: 'r1', requestId: 'q1', revision: 3 }
  assert.deepEqual(decodeRef(encodeRef(ref, { c: 2 })), { ...ref, extra: { c: 2 } })
  for (const bad of [
    undefined,
    '',
    'not json',
    '[]',
    '{"k":"k1"}',
    JSON.stringify({ ...ref, v: '3' }),
    'x'.repeat(3001),
  ])
    assert.equal(decodeRef(bad), null, String(bad))
})

test('the modal: one input per field, each in the element its type needs, indexes as option values', () => {
  const long = 'x'.repeat(200)
  const modal = answerModal(
    view([
      { id: 'short', type: 'string', max_length: 200 },
      { id: 'long', type: 'string', max_length: 201, required: true },
      { id: 'free', type: 'string' },
      { id: 'huge', type: 'string', max_length: 10_000 },
      { id: 'pick', type: 'string', enum: [long, 'b'], hint: 'select' },
      { id: 'n', type: 'number', minimum: -1.5 },
      { id: 'many', type: 'string[]', enum: Array.from({ length: 11 }, (_, i) => `o${i}`), max_items: 0 },
    ]),
    { channel: 'C1', ts: '1.2' },
  )
  assert.equal(modal.type, 'modal')
  assert.deepEqual(decodeRef(modal.private_metadata), {
    kasmId: 'k1',
    run: 'r1',
    requestId: 'q1',
    revision: 2,
    extra: { ch: 'C1', ts: '1.2' },
  })
  const blocks = modal.blocks as unknown as { block_id?: string; element: Record<string, unknown> }[]
  const element = (id: string) => blocks.find((b) => b.block_id === `f:${id}`)?.element ?? {}
  assert.deepEqual([element('short').multiline, element('short').max_length], [false, 200])
  assert.deepEqual([element('long').multiline, element('long').max_length], [true, 201])
  assert.deepEqual([element('free').multiline, element('free').max_length], [true, 3000])
  assert.equal(element('huge').max_length, 3000, "Slack's most")
  assert.equal(element('pick').type, 'static_select')
  const options = element('pick').options as { text: { text: string }; value: string }[]
  assert.deepEqual(
    options.map((o) => [o.text.text.length, o.value]),
    [
      [75, '0'],
      [1, '1'],
    ],
  )
  assert.deepEqual([element('n').is_decimal_allowed, element('n').min_value], [true, '-1.5'])
  assert.equal(element('many').type, 'multi_static_select')
  assert.equal(element('many').max_selected_items, undefined, 'max_items 0 is no cap Slack could show')
  assert.equal(
    answerModal(view([{ id: 'f', type: 'attachment' }]), { channel: 'C1', ts: '1' }).callback_id,
    undefined,
  )
})

test('values from a modal’s state: typed, empty ones left out, options outside the field’s refused', () => {
  const fields: FieldDef[] = [
    { id: 's', type: 'string' },
    { id: 'e', type: 'string', enum: ['a', 'b'] },
    { id: 'i', type: 'integer' },
    { id: 'b', type: 'boolean' },
    { id: 'l', type: 'string[]', enum: ['x', 'y', 'z'] },
    { id: 'gone', type: 'string' },
  ]
  const state = {
    'f:s': { v: { value: '' } },
    'f:e': { v: { selected_option: { value: '1' } } },
    'f:i': { v: { value: '42' } },
    'f:b': { v: { selected_option: { value: 'true' } } },
    'f:l': { v: { selected_options: [{ value: '2' }, { value: '0' }] } },
  }
  assert.deepEqual(valuesFromState(fields, state), {
    values: { e: 'b', i: 42, b: true, l: ['z', 'x'] },
    issues: [],
  })
  const bad = valuesFromState(fields, {
    'f:e': { v: { selected_option: { value: '7' } } },
    'f:i': { v: { value: 'four' } },
    'f:b': { v: { selected_option: { value: 'maybe' } } },
    'f:l': { v: { selected_options: [{ value: '-1' }] } },
  })
  assert.deepEqual(bad.issues, [
    { field: 'e', error: 'not one of the options' },
    { field: 'i', error: 'must be a number' },
    { field: 'b', error: 'not one of the options' },
    { field: 'l', error: 'not one of the options' },
  ])
  assert.deepEqual(valuesFromState(fields, null), { values: {}, issues: [] })
})

test('modal errors go under their fields; a problem without one under the first', () => {
  const fields: FieldDef[] = [
    { id: 'a', type: 'string' },
    { id: 'b', type: 'string' },
  ]
  assert.deepEqual(
    modalErrors(fields, [
      { field: 'b', error: 'required' },
      { field: 'title', error: 'too long' },
      { field: 'b', error: 'x'.repeat(200) },
    ]),
    { 'f:b': `required; ${'x'.repeat(139)}…`, 'f:a': 'title: too long' },
  )
})

test('the closing line says who, where and what, or how else it closed', () => {
  const fields: FieldDef[] = [
    { id: 'nights', type: 'integer', label: 'Nights' },
    { id: 'ok', type: 'boolean' },
  ]
  const olivia = { name: 'Olivia Operator', sub: 'olivia', via: 'slack' as const, at: '' }
  assert.equal(
    closingLine({ by: 'reply', answerer: olivia, values: { nights: 2, ok: false } }, fields).text,
    'Answered by Olivia Operator in Slack · Nights: 2 · ok: No',
  )
  assert.equal(
    closingLine({ by: 'reply', answerer: { name: '<b>', sub: 'x', at: '' }, values: null }, fields).text,
    'Answered by &lt;b&gt;',
  )
  assert.equal(closingLine({ by: 'reply', answerer: null, values: {} }, fields).text, 'Answered')
  assert.equal(closingLine({ by: 'timeout' }, fields).text, 'Timed out: nobody answered in time')
  assert.equal(closingLine({ by: 'cancelled' }, fields).text, 'Cancelled')
  assert.equal(closingLine({ by: 'run_ended' }, fields).text, 'Run ended before an answer')
  assert.equal(closingLine({ by: 'revoked<>' }, fields).text, 'Closed (revoked&lt;&gt;)')
})

test('escaping, clipping and dates', () => {
  assert.equal(escapeMrkdwn('a & <b> >'), 'a &amp; &lt;b&gt; &gt;')
  assert.equal(clip('héllo', 5), 'héllo')
  assert.equal(clip('héllo!', 5), 'héll…')
  assert.equal(clip('😀😀😀', 2), '😀…', 'code points, never half a pair')
  assert.equal(slackDate('not a date'), 'not a date')
  assert.equal(slackDate('<x>'), '&lt;x&gt;')
})

test('the notification text beside the blocks is mrkdwn too: a runtime’s title, reason or verdict pings no one', () => {
  const hostile = '<!channel> <@U123> <https://evil.example|click> &'
  const q = view([{ id: 'x', type: 'boolean' }], { title: hostile })
  const where = { kasmId: 'k1', team: 'blue', url: 'https://gw.example/sessions/k1' }
  const texts = [
    questionMessage(q).text,
    closedMessage(q, { by: 'timeout' }).text,
    handoffMessage({ ...where, reason: hostile }, hostile).text,
    runEndedMessage({ ...where, verdict: hostile, outcome: hostile }).text,
  ]
  for (const text of texts) assert.doesNotMatch(text, /[<>]|&(?!amp;|lt;|gt;)/, text)
  assert.match(texts[0] ?? '', /&lt;!channel&gt; &lt;@U123&gt; &lt;https:\/\/evil\.example\|click&gt; &amp;/)
  assert.match(texts[3] ?? '', /&lt;!channel&gt;/)
})
