import { type Browser, chromium } from 'playwright-core'

/** Debian's Chromium; CI installs it (`.ci/run`). Browsers are never downloaded. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'

/** Launches headless Chromium with the flags this closed network needs. Close it in `t.after`. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  })
}
