// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Browser, Page } from 'playwright-core'
import { assertAccessible, sharedChromium } from '../helpers/chromium.ts'
import { signInWithChromium } from '../signin/harness.ts'
import { link, messageAbout, OLIVIA, type SlackStack, startSlackStack } from './helpers.ts'

const chromium = sharedChromium()

/**
 * The console's part of linked accounts, in Chromium: the person sees their Slack link in the bar, opens it
 * with the keyboard and disconnects it; nothing shows for someone without one. Checked with axe-core at
 * desktop and phone widths, light and dark. `SCREENSHOTS=dir` saves what it looks like.
 */

async function consoleAs(
  b: Browser,
  stack: SlackStack,
  username: string,
  viewport: { width: number; height: number },
  colorScheme: 'light' | 'dark',
) {
  const context = await b.newContext({ viewport, colorScheme })
  const page = await context.newPage()
  const errors: string[] = []
  page.on('pageerror', (e) => errors.push(e.message))
  const listed = page.waitForResponse((r) => r.url() === `${stack.base}api/chat-links`)
  assert.equal(await signInWithChromium(page, stack.idp.issuer, stack.base, { username }), 303)
  await page.waitForURL(stack.base)
  await page.locator('h1').first().waitFor()
  return { page, errors, listed, close: () => context.close() }
}

async function shot(page: Page, name: string): Promise<void> {
  const dir = process.env.SCREENSHOTS
  if (dir !== undefined) await page.screenshot({ path: `${dir}/${name}.png` })
}

test('the console shows the person’s Slack link in the bar, opened and disconnected with the keyboard; accessible at both widths and schemes', async (t) => {
  const stack = await startSlackStack(t)
  stack.rt.ask({ title: 'Which browser?', fields: [{ id: 'ok', type: 'boolean' }] })
  const message = await messageAbout(stack, 'Which browser?')
  await link(stack, OLIVIA, message, 'olivia', 'krg:choose:0')
  const b = await chromium(t)

  for (const [viewport, colorScheme] of [
    [{ width: 1366, height: 800 }, 'light'],
    [{ width: 390, height: 844 }, 'dark'],
  ] as const) {
    const { page, errors, close } = await consoleAs(b, stack, 'olivia', viewport, colorScheme)
    const summary = page.locator('.chat-link summary')
    await summary.waitFor()
    assert.equal(await summary.textContent(), 'Slack: @olivia')
    await summary.focus()
    await page.keyboard.press('Enter')
    const panel = page.locator('.chat-link-panel')
    await panel.waitFor()
    assert.match(
      String(await panel.textContent()),
      /Your Slack account @olivia in krg-tests answers questions as you until /,
    )
    await assertAccessible(page, `the open link, ${viewport.width}px ${colorScheme}`)
    await shot(page, `chat-link-${viewport.width}-${colorScheme}`)
    assert.deepEqual(errors, [])
    await close()
  }

  // Disconnect, with the keyboard only.
  const { page, errors, close } = await consoleAs(b, stack, 'olivia', { width: 1366, height: 800 }, 'light')
  const summary = page.locator('.chat-link summary')
  await summary.waitFor()
  await summary.focus()
  await page.keyboard.press('Enter')
  await page.keyboard.press('Tab')
  assert.equal(await page.evaluate('document.activeElement?.textContent'), 'Disconnect')
  await page.keyboard.press('Enter')
  await page.locator('.chat-links').waitFor({ state: 'hidden' })
  assert.equal(await stack.app.people.links?.get('slack:T0TEST001:U0OLIVIA1'), null)
  // Said to screen readers on the next frame.
  await page.waitForFunction(
    "document.getElementById('announcer')?.textContent === 'Slack account @olivia disconnected'",
  )
  assert.deepEqual(errors, [])
  await close()

  // Someone without a link sees nothing of it.
  const victor = await consoleAs(b, stack, 'victor', { width: 1366, height: 800 }, 'light')
  assert.equal((await victor.listed).status(), 200)
  assert.deepEqual(await (await victor.listed).json(), { links: [] })
  assert.equal(await victor.page.locator('.chat-links').isHidden(), true)
  await victor.close()
})
