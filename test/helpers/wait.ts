/**
 * How long a test waits for a condition unless it says otherwise: generous for a loaded 2-core machine running
 * three test files at once (a gateway's boot through tsx alone has taken 20 s there). A wait ends as soon as its
 * condition holds, so this only bounds a condition that never comes; it stays well under the 180 s per-test
 * timeout, so such a test fails naming what it waited for.
 */
export const WAIT_MS = 60_000

/**
 * How long a test waits for a child process it started (a gateway through tsx, the built image's `node`, the
 * demo) to say it is ready: a boot through tsx has taken 20 s on a loaded 2-core machine, and more while its
 * neighbours boot too.
 */
export const BOOT_MS = 90_000

/** Polls `check` every 20 ms until it returns something truthy; throws naming `what` after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  check: () => T | Promise<T>,
  timeoutMs = WAIT_MS,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value) return value as NonNullable<T>
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
