import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sharedChromium } from './chromium.ts'

const chromium = sharedChromium()

// Tests reload the gateway with process.emit('SIGHUP'); in a shard's process a later file's Chromium test must
// still find the browser the earlier files shared.
test('the shared Chromium outlives a SIGHUP to the test process', async (t) => {
  const browser = await chromium(t)
  const closed = new Promise<boolean>((resolve) => browser.once('disconnected', () => resolve(true)))
  process.emit('SIGHUP', 'SIGHUP')
  // A page made and loaded after the signal: the browser still answers, and has not begun to close.
  const page = await browser.newPage()
  await page.setContent('<p>still here</p>')
  assert.equal(await page.textContent('p'), 'still here')
  assert.equal(browser.isConnected(), true)
  assert.equal(await Promise.race([closed, Promise.resolve(false)]), false)
})
