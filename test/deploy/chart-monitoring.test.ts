// test-runner: one leg (helm renders the chart and its manifests are what is checked: nothing of them runs on the Node)
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { knownSeries } from '../helpers/metric-families.ts'
import { chartDir, helmUnavailable, type Manifest, only } from './helm.ts'
import { inspectPromql } from './promql.ts'
import { render, renderWith } from './scenarios.ts'

/** Grafana's data source variable (its syntax, not a JavaScript template). */
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana variable
const DATASOURCE = '${datasource}'

interface Rule {
  alert: string
  expr: string
  for?: string
  labels: Record<string, string>
  annotations: { summary: string; description: string }
}

interface Panel {
  id: number
  type: string
  title: string
  gridPos: { h: number; w: number; x: number; y: number }
  datasource?: { uid: string }
  targets?: { expr: string; refId: string }[]
}

/** The problems of one PromQL expression: syntax, and metric names the gateway does not export. */
function problems(expr: string): string[] {
  const { errors, metrics } = inspectPromql(expr)
  const known = knownSeries()
  return [...errors, ...metrics.filter((m) => !known.has(m)).map((m) => `unknown metric ${m}`)]
}

describe('monitoring: PrometheusRule, Grafana dashboard, NetworkPolicy', {
  skip: await helmUnavailable(),
}, () => {
  test('the alerts the issue names, each valid PromQL over metrics the gateway exports, scoped to the release', async () => {
    const manifests = await render('monitoring on')
    const rule = only(manifests, 'PrometheusRule')
    assert.equal(rule.metadata.labels?.release, 'kube-prometheus-stack')
    const rules = (rule.spec as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules)
    assert.deepEqual(
      rules.map((r) => r.alert),
      [
        'KasmGatewayUpstreamTokenRefused',
        'KasmGatewayEventReadersFailing',
        'KasmGatewaySlowViewersDropped',
        'KasmGatewaySocketTakeoverFallback',
        'KasmGatewayRedisDown',
        'KasmGateway5xxRate',
        'KasmGatewayQuestionsTimingOut',
        'KasmGatewaySlowAnswers',
        'KasmGatewayManyWatchedSessions',
        'KasmGatewayConnectionsNearLimit',
        'KasmGatewayDown',
      ],
    )
    for (const r of rules) {
      assert.deepEqual(problems(r.expr), [], `${r.alert}: ${r.expr}`)
      assert.match(r.expr, /job="krg-kasm-runtime-gateway",namespace="kasm"/, `${r.alert} is scoped`)
      assert.equal(r.labels.team, 'support-platform', 'alertLabels reach every alert')
      assert.ok(['info', 'warning', 'critical'].includes(r.labels.severity ?? ''))
      assert.ok(r.annotations.summary && r.annotations.description)
    }
    const byName = new Map(rules.map((r) => [r.alert, r]))
    assert.match(byName.get('KasmGateway5xxRate')?.expr ?? '', /> 0\.05$/)
    assert.match(byName.get('KasmGatewayRedisDown')?.expr ?? '', /krg_degraded/)
    assert.match(byName.get('KasmGatewayUpstreamTokenRefused')?.expr ?? '', /reason="token_refused"/)
    assert.match(byName.get('KasmGatewaySocketTakeoverFallback')?.expr ?? '', /path="fallback"/)
    // The team report's: a share of timeouts over 15 minutes (and a floor), p90 against the time questions had.
    const timingOut = byName.get('KasmGatewayQuestionsTimingOut')?.expr ?? ''
    assert.match(timingOut, /closed_by="timeout"\}\[15m\]\)\)\s+\/ sum by \(namespace, team\)/)
    assert.match(timingOut, /> 0\.25\s+and .*>= 3$/s)
    const slow = byName.get('KasmGatewaySlowAnswers')?.expr ?? ''
    assert.match(slow, /^histogram_quantile\(0\.9, sum by \(namespace, team, le\)/)
    assert.match(slow, /> 0\.5 \* \(/)
    assert.match(slow, /krg_question_deadline_left_seconds_sum/)
    // The capacity model's (docs/scaling.md): watched sessions per replica against the value.
    assert.match(
      byName.get('KasmGatewayManyWatchedSessions')?.expr ?? '',
      /krg_cluster_watched_streams\{.*\}\) > 1600$/,
    )
    // How close a replica is to its connection cap, against the share.
    assert.match(
      byName.get('KasmGatewayConnectionsNearLimit')?.expr ?? '',
      /krg_connections_open\{.*\} \/ krg_connections_limit\{.*\}\) > 0\.9$/,
    )
    // Prometheus' own templating in the descriptions survives helm's.
    assert.match(
      byName.get('KasmGateway5xxRate')?.annotations.description ?? '',
      /\{\{ \$value \| humanizePercentage \}\}/,
    )
  })

  test('the check has teeth: a typo in a metric or a broken expression is reported', () => {
    assert.deepEqual(problems('rate(krg_http_requests_total[5m])'), [])
    assert.deepEqual(problems('rate(krg_http_request_total[5m])'), ['unknown metric krg_http_request_total'])
    assert.ok(problems('sum(rate(krg_http_requests_total[5m]) >').length > 0)
  })

  test('thresholds come from values', async () => {
    const manifests = await renderWith({
      set: [
        'metrics.prometheusRule.enabled=true',
        'metrics.prometheusRule.errorRatio=0.2',
        'metrics.prometheusRule.readerFailuresPerMinute=7',
        'metrics.prometheusRule.questionTimeoutShare=0.4',
        'metrics.prometheusRule.questionTimeoutsMin=9',
        'metrics.prometheusRule.slowAnswerDeadlineShare=0.75',
        'metrics.prometheusRule.connectionLimitShare=0.8',
      ],
    })
    const exprs = (
      only(manifests, 'PrometheusRule').spec as { groups: { rules: Rule[] }[] }
    ).groups[0]!.rules.map((r) => r.expr)
    assert.ok(exprs.some((e) => e.endsWith('> 0.2')))
    assert.ok(exprs.some((e) => e.endsWith('> 7')))
    assert.ok(exprs.some((e) => e.includes('> 0.4') && e.endsWith('>= 9')))
    assert.ok(exprs.some((e) => e.includes('> 0.75 * (')))
    assert.ok(exprs.some((e) => e.includes('krg_connections_limit') && e.endsWith('> 0.8')))
  })

  test('the Grafana dashboard: a sidecar ConfigMap holding files/grafana-dashboard.json, every query valid', async () => {
    const manifests = await render('monitoring on')
    const map = manifests.find(
      (m) => m.kind === 'ConfigMap' && m.metadata.name.endsWith('-dashboard'),
    ) as Manifest
    assert.ok(map, 'the dashboard ConfigMap')
    assert.equal(map.metadata.labels?.grafana_dashboard, '1')
    assert.equal(map.metadata.annotations?.grafana_folder, 'Kasm')
    const json = (map.data as Record<string, string>)['kasm-runtime-gateway.json'] ?? ''
    const file = await readFile(join(chartDir, 'files/grafana-dashboard.json'), 'utf8')
    assert.deepEqual(JSON.parse(json), JSON.parse(file))

    const dashboard = JSON.parse(file) as {
      uid: string
      panels: Panel[]
      templating: { list: { name: string; query: string | { query: string } }[] }
    }
    assert.equal(dashboard.uid, 'kasm-runtime-gateway')
    assert.deepEqual(
      dashboard.templating.list.map((v) => v.name),
      ['datasource', 'namespace', 'job'],
    )
    for (const v of dashboard.templating.list.slice(1)) {
      const query = typeof v.query === 'string' ? v.query : v.query.query
      const inner = /^label_values\((.+), \w+\)$/.exec(query)?.[1] ?? ''
      assert.deepEqual(problems(inner), [], `variable ${v.name}`)
    }
    const ids = new Set<number>()
    const exprs: string[] = []
    for (const panel of dashboard.panels) {
      assert.ok(!ids.has(panel.id), `panel id ${panel.id} once`)
      ids.add(panel.id)
      assert.ok(panel.gridPos.x + panel.gridPos.w <= 24, `${panel.title} fits the grid`)
      if (panel.type === 'row') continue
      assert.equal(panel.datasource?.uid, DATASOURCE, `${panel.title} uses the chosen data source`)
      assert.ok((panel.targets ?? []).length > 0, `${panel.title} has a query`)
      for (const target of panel.targets ?? []) {
        exprs.push(target.expr)
        assert.deepEqual(problems(target.expr), [], `${panel.title}: ${target.expr}`)
        assert.match(target.expr, /namespace="\$namespace",job="\$job"/, `${panel.title} is scoped`)
      }
    }
    // What an on-call person looks for first is on it.
    for (const metric of [
      'krg_degraded',
      'krg_upstream_errors_total',
      'krg_event_viewers',
      'krg_http_request_duration_seconds_bucket',
      'krg_questions_closed_total',
      'krg_question_answer_seconds_bucket',
      'krg_handoffs_total',
    ])
      assert.ok(
        exprs.some((e) => e.includes(metric)),
        `a panel shows ${metric}`,
      )
  })

  test('NetworkPolicy: Prometheus may reach the port when the ServiceMonitor is on, not otherwise', async () => {
    const spec = (m: Manifest[]) =>
      only(m, 'NetworkPolicy').spec as { ingress: { from?: Record<string, unknown>[] }[] }
    const on = spec(await render('monitoring on'))
    assert.equal(on.ingress.length, 2)
    assert.deepEqual(on.ingress[1]?.from, [
      { namespaceSelector: {}, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } } },
    ])
    const off = spec(await render('default'))
    assert.equal(off.ingress.length, 1)
    assert.ok(
      !JSON.stringify(off.ingress).includes('prometheus'),
      'without a ServiceMonitor no rule names Prometheus',
    )
  })
})
