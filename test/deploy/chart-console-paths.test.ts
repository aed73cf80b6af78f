// test-runner: one leg (helm renders the chart and its manifests are what is checked: nothing of them runs on the Node)
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { startGateway } from '../helpers/gateway.ts'
import { helmUnavailable, type Manifest } from './helm.ts'
import { render } from './scenarios.ts'

/**
 * The console's host must reach every page, asset and API the console, its sign-in and the Slack app use:
 * the paths come from the routes a gateway (with the Slack app) registers, not from a list kept by hand.
 */

/** Paths that stay inside the cluster (orchestrators and Prometheus use the Service) or are no route. */
const INTERNAL = [/^\/admin\//, /^\/metrics$/, /^\/healthz$/, /^\/readyz$/, /\*$/]

/** Every route path of a gateway with every feature on, as a request would use it (`:x` filled in). */
async function publicPaths(): Promise<string[]> {
  const gw = await startGateway({
    GATEWAY_SLACK_BOT_TOKEN: 'xoxb-1-2-chart-test',
    GATEWAY_SLACK_SIGNING_SECRET: 's'.repeat(32),
    GATEWAY_SLACK_API_URL: 'http://127.0.0.1:9/api/',
  })
  try {
    // printRoutes draws a tree: a line's name continues its parent's path.
    const parents: string[] = []
    const paths: string[] = []
    for (const line of gw.app.printRoutes({ commonPrefix: false }).split('\n')) {
      const at = line.search(/[^\s│├└─]/)
      if (at < 0) continue
      const name = line.slice(at).replace(/ \(.*\)$/, '')
      const depth = Math.floor(at / 4)
      parents.length = depth
      const path = (parents[depth - 1] ?? '') + name
      parents[depth] = path
      paths.push(path.replaceAll(/:[A-Za-z]+/g, 'x'))
    }
    return paths.filter((p) => !INTERNAL.some((re) => re.test(p)))
  } finally {
    await gw.close()
  }
}

/** Whether a Kubernetes path rule takes `path` (Ingress `Prefix` and HTTPRoute `PathPrefix` match whole segments). */
function takes(rule: { path: string; type: string }, path: string): boolean {
  if (rule.type === 'Exact') return path === rule.path
  const prefix = rule.path.endsWith('/') ? rule.path.slice(0, -1) : rule.path
  return path === prefix || path.startsWith(`${prefix}/`)
}

function consoleRules(manifests: Manifest[], host: string): { path: string; type: string }[] {
  const rules: { path: string; type: string }[] = []
  for (const m of manifests) {
    if (m.kind === 'Ingress')
      for (const rule of (
        m.spec as { rules: { host: string; http: { paths: { path: string; pathType: string }[] } }[] }
      ).rules)
        if (rule.host === host)
          rules.push(...rule.http.paths.map((p) => ({ path: p.path, type: p.pathType })))
    if (m.kind === 'HTTPRoute') {
      const spec = m.spec as {
        hostnames: string[]
        rules: { matches: { path: { type: string; value: string } }[] }[]
      }
      if (spec.hostnames.includes(host))
        for (const rule of spec.rules)
          rules.push(...rule.matches.map((x) => ({ path: x.path.value, type: x.path.type })))
    }
  }
  return rules
}

describe('the console host routes', { skip: await helmUnavailable() }, () => {
  test('every page, asset and API of the console, its sign-in and the Slack app reaches the gateway; nothing internal does', async () => {
    const paths = await publicPaths()
    for (const expected of [
      '/',
      '/sessions/x',
      '/report',
      '/assets/x',
      '/api/report.csv',
      '/slack/interactions',
    ])
      assert.ok(paths.includes(expected), `the gateway serves ${expected}`)
    for (const [scenario, base, host] of [
      ['Ingress on', '/', 'gateway.example.com'],
      ['Gateway API and escape hatches', '/', 'gateway.example.com'],
      // With GATEWAY_BASE_PATH the same paths under it on Kasm's host.
      ['Gateway API and escape hatches', '/gateway/', 'kasm.example.com'],
    ] as const) {
      const rules = consoleRules(await render(scenario), host)
      assert.ok(rules.length > 0, `${scenario}: rules for ${host}`)
      const under = (p: string) => (p.startsWith('/desktop/') ? p : `${base}${p.slice(1)}`)
      const missing = paths
        .map(under)
        .filter((p) => !rules.some((r) => r.type !== 'RegularExpression' && takes(r, p)))
      // The Kasm host's /desktop/<id>/mcp/ is its own regex rule (chart-routes.test.ts).
      assert.deepEqual(
        missing.filter((p) => host === 'gateway.example.com' || !p.startsWith('/desktop/')),
        [],
        `${scenario} (${host}): paths the console uses that do not reach the gateway`,
      )
      for (const hidden of ['/admin/sessions', '/metrics', '/healthz', `${base}admin/audit`])
        assert.ok(
          !rules.some((r) => r.path !== '/' && takes(r, hidden)),
          `${scenario}: ${hidden} is not routed`,
        )
    }
  })
})
