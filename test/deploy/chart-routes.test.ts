// test-runner: one leg (helm renders the chart and its manifests are what is checked: nothing of them runs on the Node)
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { helmUnavailable, type Manifest } from './helm.ts'
import { unknownFieldErrors } from './kube-validate.ts'
import { refusal, render, renderWith, scenarios } from './scenarios.ts'

interface PathMatch {
  type: string
  value: string
}
interface RouteSpec {
  parentRefs: { name: string; namespace?: string; sectionName?: string }[]
  hostnames: string[]
  rules: {
    matches: { path: PathMatch }[]
    timeouts?: { request?: string }
    backendRefs: { name: string; port: number }[]
  }[]
}

function routes(manifests: Manifest[]): Map<string, RouteSpec> {
  return new Map(
    manifests
      .filter((m) => m.kind === 'HTTPRoute')
      .map((m) => [(m.spec as RouteSpec).hostnames[0] ?? '', m.spec as RouteSpec]),
  )
}

/** Whether a request path takes `match`, for the regex dialects of real implementations. */
function takes(match: PathMatch, path: string, dialect: 'full' | 'prefix'): boolean {
  if (match.type === 'Exact') return path === match.value
  if (match.type === 'PathPrefix')
    return (
      path === match.value || path.startsWith(match.value.endsWith('/') ? match.value : `${match.value}/`)
    )
  // Envoy-based gateways (Envoy Gateway, Istio, kgateway) match RE2 against the whole path; NGINX-based ones
  // search from the start as a `location ~` does.
  return new RegExp(dialect === 'full' ? `^(?:${match.value})$` : match.value).test(path)
}

describe('Gateway API HTTPRoute', { skip: await helmUnavailable() }, () => {
  test('Kasm’s host gives only /desktop/<kasm_id>/mcp/ to the gateway, in both regex dialects; streams have no timeout', async () => {
    const manifests = await render('Gateway API and escape hatches')
    assert.ok(!manifests.some((m) => m.kind === 'Ingress'), 'no Ingress by default')
    const kasm = routes(manifests).get('kasm.example.com')
    assert.ok(kasm)
    assert.deepEqual(kasm.parentRefs, [{ name: 'public', namespace: 'gateway-system', sectionName: 'https' }])
    const [mcp] = kasm.rules
    assert.ok(mcp)
    assert.equal(mcp.matches[0]?.path.type, 'RegularExpression')
    assert.deepEqual(mcp.timeouts, { request: '0s' })
    assert.deepEqual(mcp.backendRefs, [{ name: 'krg-kasm-runtime-gateway', port: 80 }])
    const match = mcp.matches[0]!.path
    for (const dialect of ['full', 'prefix'] as const) {
      for (const path of [
        '/desktop/0f3a-kasm_ID/mcp/events',
        '/desktop/k1/mcp/',
        '/desktop/k1/mcp/artifacts/a/b.png',
      ])
        assert.ok(takes(match, path, dialect), `${dialect}: ${path} goes to the gateway`)
      for (const path of [
        '/desktop/k1/vnc/vnc.html',
        '/desktop/a/b/mcp/events',
        '/x/desktop/k1/mcp/',
        '/desktop/k1/mcpx',
      ])
        assert.ok(!takes(match, path, dialect), `${dialect}: ${path} stays with Kasm`)
    }
  })

  test('with GATEWAY_BASE_PATH the console’s paths under it on Kasm’s host; never admin/ or /metrics', async () => {
    const all = routes(await render('Gateway API and escape hatches'))
    const kasm = all.get('kasm.example.com')
    const base = kasm?.rules.slice(1).flatMap((r) => r.matches.map((m) => m.path))
    assert.deepEqual(base, [
      { type: 'Exact', value: '/gateway/' },
      { type: 'PathPrefix', value: '/gateway/sessions' },
      { type: 'Exact', value: '/gateway/report' },
      { type: 'Exact', value: '/gateway/favicon.ico' },
      { type: 'PathPrefix', value: '/gateway/assets/' },
      { type: 'PathPrefix', value: '/gateway/pages/' },
      { type: 'PathPrefix', value: '/gateway/api/' },
      { type: 'PathPrefix', value: '/gateway/auth/' },
      { type: 'PathPrefix', value: '/gateway/slack/' },
    ])
    const console = all.get('gateway.example.com')
    const paths = console?.rules.flatMap((r) => r.matches.map((m) => m.path)) ?? []
    assert.ok(paths.some((p) => p.type === 'Exact' && p.value === '/'))
    for (const hidden of ['/admin/sessions', '/metrics', '/healthz', '/gateway/admin/audit'])
      for (const rule of [...(kasm?.rules ?? []), ...(console?.rules ?? [])])
        for (const { path } of rule.matches)
          assert.ok(
            path.type === 'RegularExpression' || !takes(path, hidden, 'full'),
            `${hidden} is not routed`,
          )
  })

  test('no base path: one rule on Kasm’s host; an empty host drops its route', async () => {
    const manifests = await renderWith({
      set: ['httpRoute.enabled=true', 'httpRoute.parentRefs[0].name=public', 'httpRoute.consoleHost='],
    })
    const all = routes(manifests)
    assert.deepEqual([...all.keys()], ['kasm.example.com'])
    assert.equal(all.get('kasm.example.com')?.rules.length, 1)
  })

  test('refuses an HTTPRoute without a Gateway to attach to, and a match type it cannot express', async () => {
    assert.match(await refusal({ set: ['httpRoute.enabled=true'] }), /httpRoute\.parentRefs is required/)
    assert.match(
      await refusal({
        values: scenarios['Gateway API and escape hatches'],
        set: ['httpRoute.kasmPathMatch.type=Exact'],
      }),
      /kasmPathMatch/,
    )
  })

  test('the unknown-field check covers HTTPRoutes too', async () => {
    const route = structuredClone(
      (await render('Gateway API and escape hatches')).find((m) => m.kind === 'HTTPRoute'),
    ) as Manifest
    ;(route.spec as { rules: Record<string, unknown>[] }).rules[0]!.timeout = { request: '0s' }
    assert.match((await unknownFieldErrors([route])).join('\n'), /timeout/)
  })
})
