// test-runner: one leg (what it checks is what Chromium shows; the Node serving the page does not change it)
import assert from 'node:assert/strict'
import { mkdir } from 'node:fs/promises'
import { test } from 'node:test'
import { assertAccessible, cspRefusals, sharedChromium } from '../helpers/chromium.ts'
import { waitFor } from '../helpers/wait.ts'
import { signInWithChromium } from '../signin/harness.ts'
import { click, codeIn, ephemeralAfter, linkIn, messageAbout, OLIVIA, startSlackStack } from './helpers.ts'

const chromium = sharedChromium()

/**
 * Connecting a Slack account in real Chromium, as a person does it: the link from Slack, the sign-in, the
 * page naming the Slack user, the code sent to that user in Slack and typed on the page (a wrong one first,
 * said next to the field). Every page: no CSP refusal, axe-core, the keyboard reaching the field first,
 * nothing sideways at 390 px, light and dark. Screenshots go to SCREENSHOT_DIR (default
 * /tmp/krg-screenshots)/slack-link.
 */

const SHOTS = `${process.env.SCREENSHOT_DIR ?? '/tmp/krg-screenshots'}/slack-link`

test('connecting a Slack account with the code from Slack, in Chromium, at desktop and phone widths', async (t) => {
  await mkdir(SHOTS, { recursive: true })
  const stack = await startSlackStack(t)
  const browser = await chromium(t)
  for (const [scheme, viewport] of [
    ['light', { width: 1100, height: 800 }],
    ['dark', { width: 390, height: 844 }],
  ] as const) {
    stack.rt.ask({ title: `Link ${scheme}`, fields: [{ id: 'ok', type: 'boolean' }] })
    const message = await messageAbout(stack, `Link ${scheme}`)
    const before = stack.slack.ephemerals(OLIVIA.id).length
    await click(stack, OLIVIA, message, 'krg:choose:0')
    const url = linkIn(await ephemeralAfter(stack.slack, OLIVIA, before))
    const context = await browser.newContext({ viewport, colorScheme: scheme })
    const page = await context.newPage()
    const refused = cspRefusals(page)
    const look = async (name: string) => {
      assert.deepEqual(refused, [], `${name}: the CSP refused something`)
      const overflow = Number(await page.evaluate('document.scrollingElement.scrollWidth - innerWidth'))
      assert.ok(overflow <= 0, `${name} (${viewport.width} px): scrolls sideways by ${overflow} px`)
      await page.screenshot({ path: `${SHOTS}/${name}-${scheme}-${viewport.width}.png`, fullPage: true })
      await assertAccessible(page, `${name} (${scheme})`)
    }

    await signInWithChromium(page, stack.idp.issuer, url)
    await page.waitForURL(`${stack.base}auth/slack-link/confirm`)
    assert.equal(await page.locator('h1').textContent(), 'Connect your Slack account')
    await look('confirm')
    const dms = stack.slack.posts(OLIVIA.id).length
    // The keyboard: the form's button is the first stop.
    await page.keyboard.press('Tab')
    assert.equal(await page.evaluate('document.activeElement?.textContent'), 'Send me the code in Slack')
    // The form posts back to the page's own URL: a wait for that URL holds at once, before the answer came.
    // The next page is known by its heading.
    await page.keyboard.press('Enter')
    await page.getByRole('heading', { level: 1, name: 'Type the code from Slack' }).waitFor()
    assert.equal(page.url(), `${stack.base}auth/slack-link/confirm`)
    // The field has focus at once (autofocus), with its label.
    assert.equal(await page.evaluate('document.activeElement?.id'), 'field-code')
    assert.equal(await page.getByLabel('Code from Slack').count(), 1)
    await look('code')
    const dm = await waitFor('the code in Slack', () => stack.slack.posts(OLIVIA.id)[dms])

    await page.keyboard.type('0000 0000')
    await Promise.all([page.waitForURL(`${stack.base}auth/slack-link/code`), page.keyboard.press('Enter')])
    assert.match(String(await page.locator('.field-error').textContent()), /4 more tries/)
    assert.equal(await page.getByLabel('Code from Slack').getAttribute('aria-invalid'), 'true')
    await look('code-wrong')

    await page.getByLabel('Code from Slack').fill(codeIn(dm))
    // The same address as the page with the wrong code: wait for the navigation itself.
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')])
    assert.equal(await page.locator('h1').textContent(), 'Your Slack account is connected')
    await look('connected')
    await context.close()
    await stack.app.people.links?.remove(`slack:T0TEST001:${OLIVIA.id}`)
  }
})
