// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sharedChromium } from '../helpers/chromium.ts'
import { addRuntime, signIn, startConsoleGateway } from './helpers.ts'

const chromium = sharedChromium()

const carol = { sub: 'carol', name: 'Carol', roles: ['operator' as const], teams: ['blue'] }

/** A 1x1 PNG. */
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d4948445200000001000000010806000000' +
    '1f15c4890000000d49444154789c6360f8cfc0f01f0005000201' +
    'a5d3e9d30000000049454e44ae426082',
  'hex',
)

test('every field type of the protocol: checked in the page as the runtime will, empty fields never sent', async (t) => {
  const gw = await startConsoleGateway(t, { people: [carol] })
  const rt = await addRuntime(t, gw, 'k1', 'blue', { futureFieldTypes: ['date'] })
  const asked = rt.ask({
    title: 'Set up the export',
    fields: [
      { id: 'name', type: 'string', pattern: '^[A-Z]', max_length: 10, label: 'Name', required: true },
      {
        id: 'browser',
        type: 'string',
        enum: ['chrome', 'firefox'],
        hint: 'radio',
        label: 'Browser',
        required: true,
      },
      {
        id: 'region',
        type: 'string',
        enum: ['eu-west', 'eu-north', 'us-east', 'us-west', 'ap-south'],
        label: 'Region',
      },
      { id: 'count', type: 'integer', minimum: 1, maximum: 5, label: 'Count', required: true },
      { id: 'ratio', type: 'number', minimum: 0, maximum: 2, label: 'Ratio', required: true },
      { id: 'ok', type: 'boolean', label: 'Confirm', required: true },
      {
        id: 'tags',
        type: 'string[]',
        enum: ['alpha', 'beta', 'gamma'],
        min_items: 1,
        max_items: 2,
        label: 'Tags',
      },
      {
        id: 'proof',
        type: 'attachment',
        accept: ['image/png'],
        max_bytes: 2000,
        label: 'Proof',
        required: true,
      },
      { id: 'note', type: 'string', label: 'Note' },
      { id: 'extra', type: 'integer', label: 'Extra' },
    ],
  })
  const future = rt.ask({
    title: 'When should it run?',
    fields: [{ id: 'when', type: 'date', required: true }],
  })

  const b = await chromium(t)
  const page = await signIn(t, b, gw, carol, { path: '/sessions/k1#inbox' })
  const form = page.locator(`[data-request="${asked.request_id}"]`)
  await form.waitFor()
  const posts = () => rt.received.filter((r) => r.method === 'POST' && r.url.startsWith('/messages')).length
  const error = (label: string) =>
    form.locator('.field', { has: page.getByText(label, { exact: true }) }).locator('.field-error')

  // Nothing filled in: the required fields say so, and nothing is sent.
  await form.getByRole('button', { name: 'Answer' }).click()
  await error('Name').waitFor()
  for (const label of ['Name', 'Browser', 'Count', 'Ratio', 'Confirm', 'Proof']) {
    assert.equal(await error(label).textContent(), 'required', label)
  }
  assert.equal(await error('Note').isVisible(), false, 'an optional field left empty is fine')
  assert.equal(
    await page.evaluate('document.activeElement?.id'),
    await form.getByLabel('Name').getAttribute('id'),
  )

  // Wrong values, each refused at its field by the runtime's own rules, in the page.
  await form.getByLabel('Name').fill('abc')
  await form.getByLabel('Count').fill('9')
  await form.getByLabel('Ratio').fill('x')
  for (const tag of ['alpha', 'beta', 'gamma']) await form.getByLabel(tag).check()
  await form
    .getByLabel('Proof')
    .setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('no') })
  assert.match((await error('Proof').textContent()) ?? '', /type text\/plain is not accepted/)
  await form
    .getByLabel('Proof')
    .setInputFiles({ name: 'big.png', mimeType: 'image/png', buffer: Buffer.alloc(3000, 1) })
  assert.match((await error('Proof').textContent()) ?? '', /larger than 2000 bytes/)
  await form.getByRole('button', { name: 'Answer' }).click()
  assert.match((await error('Name').textContent()) ?? '', /does not match/)
  assert.equal(await error('Count').textContent(), 'must be at most 5')
  assert.equal(await error('Ratio').textContent(), 'must be a number')
  assert.equal(await error('Tags').textContent(), 'choose at most 2')
  assert.equal(posts(), 0, 'nothing the runtime would refuse is sent')
  assert.equal(
    rt.received.filter((r) => r.url.startsWith('/attachments')).length,
    0,
    'a file the field refuses is not uploaded',
  )

  // Right values: decimals for a number, Yes/No for a boolean, a list, an uploaded file.
  await form.getByLabel('Name').fill('Ann')
  await form.getByLabel('firefox').check()
  await form.getByLabel('Region').selectOption('us-east')
  await form.getByLabel('Count').fill('3')
  await form.getByLabel('Ratio').fill('1.25')
  await form.getByLabel('Yes').check()
  await form.getByLabel('beta').uncheck()
  await form.getByLabel('Proof').setInputFiles({ name: 'proof.png', mimeType: 'image/png', buffer: PNG })
  await form.locator('text=proof.png (').waitFor()
  await form.getByRole('button', { name: 'Answer' }).click()
  await form.locator('text=Answered by Carol').waitFor()

  const stored = (await (await fetch(`${rt.url}messages`)).json()) as {
    messages: { reply_to?: string; values?: Record<string, unknown>; attachments?: string[] }[]
  }
  const reply = stored.messages.find((m) => m.reply_to === asked.request_id)
  const proof = reply?.values?.proof
  assert.equal(typeof proof, 'string')
  assert.deepEqual(reply?.values, {
    name: 'Ann',
    browser: 'firefox',
    region: 'us-east',
    count: 3,
    ratio: 1.25,
    ok: true,
    tags: ['alpha', 'gamma'],
    proof,
  })
  // What the person left empty was not sent at all (no "" and no 0).
  assert.ok(!('note' in (reply?.values ?? {})) && !('extra' in (reply?.values ?? {})))
  await form.locator('dd >> text=alpha, gamma').waitFor()

  // A field type this console does not know: the raw request and the richer-UI note, and no Answer.
  const unknown = page.locator(`[data-request="${future.request_id}"]`)
  await unknown.locator('text=This request needs a richer UI').waitFor()
  assert.match((await unknown.locator('pre.raw').textContent()) ?? '', /"type": "date"/)
  assert.equal(await unknown.getByRole('button', { name: 'Answer' }).count(), 0)
})
