// test-runner: one leg (helm renders the chart and its manifests are what is checked: nothing of them runs on the Node)
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { helmUnavailable, type Manifest, only } from './helm.ts'
import { gatewayContainer, podVolumes, refusal, render } from './scenarios.ts'

interface PodTemplate {
  metadata: { annotations: Record<string, string>; labels: Record<string, string> }
  spec: { containers: { volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[] }[] }
}

function template(manifests: Manifest[]): PodTemplate {
  return (only(manifests, 'Deployment').spec as { template: PodTemplate }).template
}

describe('escape hatches and a private CA', { skip: await helmUnavailable() }, () => {
  test('extraEnv, extraEnvFrom, extraVolumes, extraVolumeMounts, podAnnotations, podLabels reach the pod', async () => {
    const manifests = await render('Gateway API and escape hatches')
    const container = gatewayContainer(manifests)
    const env = container.env ?? []
    assert.equal(env.find((e) => e.name === 'NODE_OPTIONS')?.value, '--max-old-space-size=384')
    assert.deepEqual(env.find((e) => e.name === 'POD_IP')?.valueFrom, {
      fieldRef: { fieldPath: 'status.podIP' },
    })
    assert.deepEqual(container.envFrom?.[1], { configMapRef: { name: 'gateway-extra-env' } })
    assert.deepEqual(
      podVolumes(manifests).find((v) => v.name === 'scratch'),
      { name: 'scratch', emptyDir: { sizeLimit: '16Mi' } },
    )
    const pod = template(manifests)
    assert.ok(
      pod.spec.containers[0]?.volumeMounts.some(
        (m) => m.name === 'scratch' && m.mountPath === '/var/scratch',
      ),
    )
    assert.equal(pod.metadata.annotations['example.com/scrape-logs'], 'true')
    assert.ok(pod.metadata.annotations['checksum/config'], 'the chart’s own annotations stay')
    assert.equal(pod.metadata.labels['example.com/tier'], 'edge')
    // Secrets as environment variables here (secret.mountAsFiles: false): no secret volume.
    assert.ok(!podVolumes(manifests).some((v) => v.name === 'secrets'))
    assert.ok(env.some((e) => e.name === 'GATEWAY_COOKIE_SECRET' && e.valueFrom?.secretKeyRef))
  })

  test('extraObjects are rendered with the release, as templates when given as strings', async () => {
    const manifests = await render('Gateway API and escape hatches')
    const extra = manifests.find((m) => m.kind === 'ConfigMap' && m.metadata.name === 'gateway-extra-env')
    assert.equal(extra?.metadata.labels?.['app.kubernetes.io/instance'], 'krg')
    assert.deepEqual(extra?.data, { GREETING: 'hello' })
    assert.ok(manifests.some((m) => m.kind === 'ServiceAccount' && m.metadata.name === 'extra-reader'))
  })

  test('extraCACerts mounts the bundle and names it in NODE_EXTRA_CA_CERTS', async () => {
    const manifests = await render('Gateway API and escape hatches')
    const env = gatewayContainer(manifests).env ?? []
    assert.equal(
      env.find((e) => e.name === 'NODE_EXTRA_CA_CERTS')?.value,
      '/etc/kasm-runtime-gateway-ca/ca-bundle.pem',
    )
    assert.deepEqual(
      podVolumes(manifests).find((v) => v.name === 'extra-ca-certs'),
      {
        name: 'extra-ca-certs',
        configMap: { name: 'corporate-ca', items: [{ key: 'ca-bundle.pem', path: 'ca-bundle.pem' }] },
      },
    )
    assert.deepEqual(
      template(manifests).spec.containers[0]?.volumeMounts.find((m) => m.name === 'extra-ca-certs'),
      { name: 'extra-ca-certs', mountPath: '/etc/kasm-runtime-gateway-ca', readOnly: true },
    )
  })

  test('refuses extras that would bypass or contradict the validated settings, naming what to set', async () => {
    const cases: [string[], RegExp][] = [
      [
        ['extraEnv[0].name=PORT', 'extraEnv[0].value=9000'],
        /extraEnv: PORT is a gateway variable: set config\.PORT/,
      ],
      [
        ['extraEnv[0].name=GATEWAY_JWT_SECRET', 'extraEnv[0].value=x'],
        /extraEnv: GATEWAY_JWT_SECRET is a gateway variable/,
      ],
      [
        ['extraEnv[0].name=REDIS_URL_FILE', 'extraEnv[0].value=/x'],
        /extraEnv: REDIS_URL_FILE: the chart already gives REDIS_URL/,
      ],
      [
        ['extraCACerts.configMap=ca', 'extraEnv[0].name=NODE_EXTRA_CA_CERTS', 'extraEnv[0].value=/x'],
        /NODE_EXTRA_CA_CERTS is set by extraCACerts/,
      ],
      [
        ['extraCACerts.configMap=ca', 'extraCACerts.secret=ca'],
        /extraCACerts: set configMap or secret, not both/,
      ],
      [['extraEnv[0].name=not a name'], /extraEnv/],
      [['extraVolumeMounts[0].name=x'], /extraVolumeMounts/],
    ]
    for (const [set, message] of cases) assert.match(await refusal({ set }), message, set.join(' '))
  })
})
