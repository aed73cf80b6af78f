/**
 * The console's two speed targets, in real Chromium against the real app on loopback:
 * - the first overview row: from navigation start to the first session row on screen (the page marks it),
 *   with `--sessions` sessions, one of them asking a question; the anchor is the same load's `responseEnd`
 *   of the HTML (what any page of this server costs before its script runs);
 * - a replayed session of `--events` events: from navigation start to the last timeline item on screen, the
 *   main thread's long tasks (over 50 ms) meanwhile, and how many appends the timeline took.
 * Writes bench/results/console-<date>.md.
 *
 *   npm run bench -- console [--sessions 50] [--events 1000] [--loads 15]
 */
import { performance } from 'node:perf_hooks'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { type SimulatedRuntime, startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { launchChromium } from '../../test/helpers/chromium.ts'
import { logger, machine, readFlags, writeResult } from '../common/orchestrator.ts'

const log = logger('console')
const TOKEN = 'bench-console-messaging-token'

/** What the page reports about one load (set up before it runs); `wanted`: timeline items of the replay. */
const probe = (wanted: number): string => `(() => {
  window.__benchWanted = ${wanted}
  window.__bench = { longTasks: [], timelineDoneAt: null, batches: 0 }
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.__bench.longTasks.push(Math.round(e.duration))
  }).observe({ type: 'longtask', buffered: true })
  new MutationObserver((records) => {
    for (const r of records) {
      if (!r.target.matches || !r.target.matches('ol.timeline')) continue
      window.__bench.batches++
      if (r.target.children.length >= window.__benchWanted && window.__bench.timelineDoneAt === null)
        window.__bench.timelineDoneAt = performance.now()
    }
  }).observe(document, { subtree: true, childList: true })
})()`

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
}

const fmt = (n: number): string => (Number.isFinite(n) ? n.toFixed(0) : '–')

export async function main(argv: string[]): Promise<void> {
  const flags = readFlags(argv, ['--sessions', '--events', '--loads'], true)
  const sessions = Math.min(500, Number(flags.get('--sessions') ?? 50))
  const events = Math.min(4000, Number(flags.get('--events') ?? 1000))
  const loads = Math.min(50, Number(flags.get('--loads') ?? 15))

  const config = loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    GATEWAY_DEMO: 'off',
    GATEWAY_JWT_SECRET: 'bench-secret-that-is-long-enough-for-hs256-0123456789',
    GATEWAY_COOKIE_SECRET: 'bench-cookie-secret-0123456789abcdefghij',
    GATEWAY_MAX_STREAMS_PER_OPERATOR: '1000',
    GATEWAY_RATE_LIMIT_MAX: '100000',
  })
  const app = await buildApp(config)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  const runtimes: SimulatedRuntime[] = []
  const browser = await launchChromium()
  try {
    log(`${sessions} sessions, a replay of ${events} events, ${loads} loads each`)
    for (let i = 0; i < sessions; i++) {
      const rt = await startSimulatedRuntime({ messagingToken: TOKEN, kasmId: `k${i}` })
      runtimes.push(rt)
      rt.emit('info', { run_id: rt.run, app: 'expenses', goal: `Goal of session ${i}`, agentic: true })
      rt.emit('status', { phase: 'agentic' })
      await app.sessions.put({
        kasmId: `k${i}`,
        upstream: rt.url,
        team: `team-${i % 5}`,
        messagingToken: TOKEN,
        source: 'admin',
      })
    }
    runtimes[0]?.ask({ title: 'Which cost centre?', fields: [{ id: 'cc', type: 'string', required: true }] })
    const replay = runtimes[1] as SimulatedRuntime
    // The runtime's opening info and the two above, then steps and log lines up to `events`.
    for (let i = 4; i <= events; i++) {
      if (i % 3 === 0) replay.emit('log', { level: 'info', msg: `line ${i}` })
      else replay.emit('step', { n: i, action: `click(${i})`, result: 'ok', duration_ms: i })
    }

    const context = await browser.newContext({ viewport: { width: 1366, height: 800 } })
    await context.addInitScript(probe(events + 1))
    const page = await context.newPage()
    // Signed in once with a one-time link: what is measured is the loads after it, not the sign-in.
    const ticket = app.auth.issueLoginTicket({
      sub: 'bench',
      name: 'Bench',
      roles: ['operator'],
      teams: ['*'],
    })
    await page.goto(`${url}/auth/login?ticket=${ticket}`)
    await page.waitForSelector('.session-row')

    const firstRow: number[] = []
    const anchor: number[] = []
    for (let i = 0; i < loads; i++) {
      await page.goto(`${url}/`)
      await page.waitForSelector('.session-row')
      const t = (await page.evaluate(`(() => {
        const mark = performance.getEntriesByName('krg:first-overview-row')[0]
        const nav = performance.getEntriesByType('navigation')[0]
        return { first: mark ? mark.startTime : NaN, responseEnd: nav ? nav.responseEnd : NaN }
      })()`)) as { first: number; responseEnd: number }
      firstRow.push(t.first)
      anchor.push(t.responseEnd)
    }

    const renderMs: number[] = []
    const longTasks: number[] = []
    const batches: number[] = []
    for (let i = 0; i < loads; i++) {
      const started = performance.now()
      await page.goto(`${url}/sessions/k1`)
      for (;;) {
        const done = (await page.evaluate('window.__bench.timelineDoneAt')) as number | null
        if (done !== null) break
        if (performance.now() - started > 30_000) throw new Error('the replay did not render within 30 s')
        await new Promise((r) => setTimeout(r, 20))
      }
      const b = (await page.evaluate('window.__bench')) as {
        longTasks: number[]
        timelineDoneAt: number
        batches: number
      }
      renderMs.push(b.timelineDoneAt)
      longTasks.push(b.longTasks.length === 0 ? 0 : Math.max(...b.longTasks))
      batches.push(b.batches)
    }
    await context.close()

    const date = new Date().toISOString().slice(0, 10)
    const report = `# console — ${date}

\`npm run bench -- console --sessions ${sessions} --events ${events} --loads ${loads}\`

Machine: ${machine()}. Chromium ${browser.version()} headless, loopback, the real app (all plugins) in the bench
process with ${sessions} simulated runtimes. Times are from navigation start, in the page's own clock; median and p95 of
${loads} loads each.

| measure | median | p95 | target |
| --- | --- | --- | --- |
| first overview row on screen (ms) | ${fmt(quantile(firstRow, 0.5))} | ${fmt(quantile(firstRow, 0.95))} | under 300 |
| anchor: the HTML's responseEnd (ms) | ${fmt(quantile(anchor, 0.5))} | ${fmt(quantile(anchor, 0.95))} | |
| first row / anchor | ${(quantile(firstRow, 0.5) / quantile(anchor, 0.5)).toFixed(1)} | | |
| ${events} replayed events on screen (ms) | ${fmt(quantile(renderMs, 0.5))} | ${fmt(quantile(renderMs, 0.95))} | no jank |
| longest main-thread task during the replay (ms, 0 = none over 50) | ${fmt(quantile(longTasks, 0.5))} | ${fmt(quantile(longTasks, 0.95))} | |
| timeline appends for the replay (one per animation frame) | ${fmt(quantile(batches, 0.5))} | ${fmt(quantile(batches, 0.95))} | far below ${events} |
`
    process.stdout.write(`\n${report}\n`)
    log(`wrote ${writeResult('console', date, report)}`)
  } finally {
    await browser.close()
    await app.close()
    await Promise.all(runtimes.map((r) => r.close()))
  }
}
