// test-runner: one leg (helm renders the chart and its manifests are what is checked: nothing of them runs on the Node)
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { loadConfig } from '../../src/config.ts'
import { version } from '../../src/version.ts'
import {
  chartDir,
  fetchHelm,
  helm,
  helmSource,
  helmUnavailable,
  type Manifest,
  only,
  template,
} from './helm.ts'
import { schemaErrors, unknownFieldErrors } from './kube-validate.ts'
import { gatewayContainer, refusal, render, renderWith, scenarios } from './scenarios.ts'

interface Probe {
  httpGet: { path: string; port: string }
}
interface PodSpec {
  terminationGracePeriodSeconds: number
  securityContext: Record<string, unknown>
  automountServiceAccountToken: boolean
  affinity?: { podAntiAffinity: Record<string, unknown> }
  topologySpreadConstraints?: { labelSelector?: { matchLabels: Record<string, string> } }[]
  volumes: { name: string; secret?: { secretName: string; items: { key: string; path: string }[] } }[]
  containers: {
    image: string
    ports: { name: string; containerPort: number }[]
    securityContext: { readOnlyRootFilesystem: boolean; allowPrivilegeEscalation: boolean }
    lifecycle: { preStop: { exec: { command: string[] } } }
    startupProbe: Probe
    livenessProbe: Probe
    readinessProbe: Probe
    volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[]
  }[]
}

function podSpec(manifests: Manifest[]): PodSpec {
  return (only(manifests, 'Deployment').spec as { template: { spec: PodSpec } }).template.spec
}

function kinds(manifests: Manifest[]): string[] {
  return manifests.map((m) => m.kind).sort()
}

function secretData(manifests: Manifest[]): Record<string, string> {
  const data = (only(manifests, 'Secret').data ?? {}) as Record<string, string>
  return Object.fromEntries(
    Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
  )
}

function secretRef(manifests: Manifest[], key: string) {
  const v = gatewayContainer(manifests).env?.find((e) => e.name === key)
  assert.ok(v?.valueFrom?.secretKeyRef, `${key} comes from a Secret`)
  return v.valueFrom.secretKeyRef
}

describe('helm chart', { concurrency: 4, skip: await helmUnavailable() }, () => {
  test('the helm tarball is refused when its integrity is not the pinned one', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'krg-helm-'))
    t.after(() => rm(dir, { recursive: true, force: true }))
    const forged = { ...helmSource, integrity: `sha512-${Buffer.alloc(64).toString('base64')}` }
    await assert.rejects(fetchHelm(forged, dir), /tarball integrity sha512-\S+ is not the pinned/)
  })

  for (const [name, values] of Object.entries(scenarios)) {
    test(`helm lint --strict: ${name}`, async () => {
      const args = ['lint', chartDir, '--strict', '--namespace', 'kasm']
      for (const file of values) args.push('--values', file)
      const result = await helm(args)
      assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`)
      assert.match(result.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/)
    })

    test(`every manifest validates against the Kubernetes schemas: ${name}`, async () => {
      const manifests = await render(name)
      assert.ok(manifests.length >= 5)
      assert.deepEqual(schemaErrors(manifests), [])
    })
  }

  test('no manifest of any value set has a field Kubernetes does not know', async () => {
    const all = (await Promise.all(Object.keys(scenarios).map(render))).flat()
    assert.deepEqual(await unknownFieldErrors(all), [])
  })

  test('the validators catch what they claim to (a wrong type, an unknown field)', async () => {
    const deployment = structuredClone(only(await render('default'), 'Deployment'))
    const spec = deployment.spec as {
      replicas: unknown
      template: { spec: { containers: Record<string, unknown>[] } }
    }
    spec.replicas = '2'
    assert.match(schemaErrors([deployment]).join('\n'), /replicas must be integer/)
    spec.replicas = 2
    spec.template.spec.containers[0]!.readinesProbe = {}
    assert.match((await unknownFieldErrors([deployment])).join('\n'), /readinesProbe/)
  })

  test('defaults: two replicas behind anti-affinity, hardened, drained within the grace period', async () => {
    const manifests = await render('default')
    // No Ingress or HTTPRoute unless asked for: which one depends on the cluster.
    assert.deepEqual(kinds(manifests), [
      'ConfigMap',
      'Deployment',
      'NetworkPolicy',
      'PodDisruptionBudget',
      'Secret',
      'Service',
      'ServiceAccount',
    ])
    assert.equal((only(manifests, 'Deployment').spec as { replicas: number }).replicas, 2)
    const pod = podSpec(manifests)
    const [container] = pod.containers
    assert.ok(container)
    // GATEWAY_SHUTDOWN_GRACE_MS 30000 -> 30 s drain + 5 s preStop sleep + 5 s margin.
    assert.equal(pod.terminationGracePeriodSeconds, 40)
    assert.deepEqual(container.lifecycle.preStop.exec.command, ['sleep', '5'])
    assert.equal(pod.securityContext.runAsNonRoot, true)
    assert.equal(pod.securityContext.runAsUser, 1000)
    assert.equal(pod.automountServiceAccountToken, false)
    assert.equal(container.securityContext.readOnlyRootFilesystem, true)
    assert.equal(container.securityContext.allowPrivilegeEscalation, false)
    assert.ok(
      container.volumeMounts.some((m) => m.mountPath === '/tmp'),
      'a writable /tmp on a read-only root',
    )
    assert.deepEqual(container.ports, [{ name: 'http', containerPort: 8080, protocol: 'TCP' }])
    assert.equal(container.startupProbe.httpGet.path, '/healthz')
    assert.equal(container.livenessProbe.httpGet.path, '/healthz')
    assert.equal(container.readinessProbe.httpGet.path, '/readyz')
    // The chart's appVersion is the package's version (the release's one number): the image defaults to it.
    assert.equal(container.image, `kasm-runtime-gateway:${version}`)
    assert.ok(pod.affinity?.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution)
    assert.equal((only(manifests, 'PodDisruptionBudget').spec as { minAvailable: number }).minAvailable, 1)
    // Secrets are files of a read-only volume named by <NAME>_FILE, never environment values; the volume is
    // required, so two replicas without REDIS_URL in the Secret do not start.
    const keys = ['GATEWAY_COOKIE_SECRET', 'GATEWAY_ENCRYPTION_KEY', 'GATEWAY_JWT_SECRET', 'REDIS_URL']
    const env = gatewayContainer(manifests).env ?? []
    assert.ok(!env.some((e) => e.valueFrom?.secretKeyRef), 'no secret in the environment')
    for (const key of keys)
      assert.equal(
        env.find((e) => e.name === `${key}_FILE`)?.value,
        `/var/run/secrets/kasm-runtime-gateway/${key}`,
      )
    const volume = pod.volumes.find((v) => v.name === 'secrets')
    assert.deepEqual(
      volume?.secret?.items.map((i) => [i.key, i.path]),
      keys.map((k) => [k, k]),
    )
    assert.equal((volume?.secret as { optional?: boolean } | undefined)?.optional, undefined)
    assert.deepEqual(
      container.volumeMounts.find((m) => m.name === 'secrets'),
      { name: 'secrets', mountPath: '/var/run/secrets/kasm-runtime-gateway', readOnly: true },
    )
  })

  test('secret.mountAsFiles=false: the same secrets as environment variables, REDIS_URL required', async () => {
    const manifests = await renderWith({ set: ['secret.mountAsFiles=false'] })
    assert.equal(secretRef(manifests, 'REDIS_URL').optional, false)
    assert.equal(secretRef(manifests, 'GATEWAY_JWT_SECRET').optional, true)
    assert.ok(!podSpec(manifests).volumes.some((v) => v.name === 'secrets'))
    const sentinel = await renderWith({
      set: ['secret.mountAsFiles=false', 'secret.env.REDIS_URL='],
      setString: ['config.GATEWAY_REDIS_SENTINELS=redis:26379'],
    })
    assert.equal(
      (gatewayContainer(sentinel).env ?? []).find((e) => e.name === 'REDIS_URL'),
      undefined,
      'with Sentinel and no REDIS_URL, none is referenced',
    )
  })

  test('defaults: generated secrets are well-formed and the user-supplied ones are kept', async () => {
    const data = secretData(await render('default'))
    assert.deepEqual(Object.keys(data).sort(), [
      'GATEWAY_COOKIE_SECRET',
      'GATEWAY_ENCRYPTION_KEY',
      'GATEWAY_JWT_SECRET',
      'REDIS_URL',
    ])
    assert.match(data.GATEWAY_ENCRYPTION_KEY!, /^[A-Za-z0-9_-]{43}$/)
    assert.equal(Buffer.from(data.GATEWAY_ENCRYPTION_KEY!, 'base64url').length, 32)
    assert.ok(data.GATEWAY_COOKIE_SECRET!.length >= 32)
    assert.ok(data.GATEWAY_JWT_SECRET!.length >= 32)
    assert.equal(data.REDIS_URL, 'redis://redis-master:6379')

    const cookie = 'c'.repeat(40)
    const again = secretData(await renderWith({ setString: [`secret.env.GATEWAY_COOKIE_SECRET=${cookie}`] }))
    assert.equal(again.GATEWAY_COOKIE_SECRET, cookie)
    assert.notEqual(
      again.GATEWAY_ENCRYPTION_KEY,
      data.GATEWAY_ENCRYPTION_KEY,
      'generated anew without a cluster',
    )
  })

  test('a rotation key list reaches the pods as the gateway reads it', async () => {
    const [oldKey, newKey] = [Buffer.alloc(32, 1), Buffer.alloc(32, 2)].map((b) => b.toString('base64url'))
    // `--set` separates values at commas: a list is escaped there (or given in a values file).
    const data = secretData(
      await renderWith({ setString: [`secret.env.GATEWAY_ENCRYPTION_KEY=${newKey}\\,${oldKey}`] }),
    )
    assert.equal(data.GATEWAY_ENCRYPTION_KEY, `${newKey},${oldKey}`)
    const env = { REDIS_URL: 'redis://r:6379', GATEWAY_ENCRYPTION_KEY: data.GATEWAY_ENCRYPTION_KEY ?? '' }
    assert.deepEqual(loadConfig(env).env.GATEWAY_ENCRYPTION_KEY, [newKey, oldKey])
  })

  test('with a JWKS URL the chart generates no JWT secret', async () => {
    const manifests = await renderWith({
      setString: [
        'config.GATEWAY_JWKS_URL=https://idp.example.com/jwks',
        'config.GATEWAY_JWT_ISSUER=https://idp.example.com',
        'config.GATEWAY_JWT_AUDIENCE=krg',
      ],
    })
    assert.equal(secretData(manifests).GATEWAY_JWT_SECRET, undefined)
  })

  test("the Ingress sends only /desktop/<kasm_id>/mcp/ of Kasm's host, SSE-safe", async () => {
    const ingress = only(await render('Ingress on'), 'Ingress')
    const annotations = ingress.metadata.annotations ?? {}
    assert.equal(annotations['nginx.ingress.kubernetes.io/proxy-buffering'], 'off')
    assert.equal(annotations['nginx.ingress.kubernetes.io/proxy-read-timeout'], '3600')
    assert.equal(annotations['nginx.ingress.kubernetes.io/proxy-send-timeout'], '3600')
    assert.equal(annotations['nginx.ingress.kubernetes.io/use-regex'], 'true')
    assert.equal(annotations['nginx.ingress.kubernetes.io/proxy-body-size'], '9m')
    const rules = (
      ingress.spec as { rules: { host: string; http: { paths: { path: string; pathType: string }[] } }[] }
    ).rules
    const kasm = rules.find((r) => r.host === 'kasm.example.com')
    assert.ok(kasm)
    assert.equal(kasm.http.paths.length, 1)
    const [rule] = kasm.http.paths
    assert.equal(rule?.pathType, 'ImplementationSpecific')
    // ingress-nginx anchors the regex at the start of the path.
    const re = new RegExp(`^${rule?.path}`)
    assert.ok(re.test('/desktop/0f3a-kasm_ID/mcp/events'))
    assert.ok(!re.test('/desktop/0f3a/vnc/vnc.html'), 'the viewer stays with Kasm')
    assert.ok(!re.test('/desktop/a/b/mcp/events'), 'one path segment only')
    const consoleRule = rules.find((r) => r.host === 'gateway.example.com')
    assert.ok(consoleRule)
    const paths = consoleRule.http.paths.map((p) => p.path)
    assert.ok(paths.includes('/'))
    for (const hidden of ['/admin/', '/metrics', '/healthz'])
      assert.ok(!paths.some((p) => hidden.startsWith(p) && p !== '/'), `${hidden} is not routed publicly`)
  })

  test("a GATEWAY_BASE_PATH also routes it on Kasm's host: people sign in and use the console there", async () => {
    const manifests = await template({ set: ['ingress.enabled=true', 'config.GATEWAY_BASE_PATH=/gateway/'] })
    const rules = (
      only(manifests, 'Ingress').spec as {
        rules: { host: string; http: { paths: { path: string; pathType: string }[] } }[]
      }
    ).rules
    const kasm = rules.find((r) => r.host === 'kasm.example.com')
    assert.deepEqual(
      kasm?.http.paths.map((p) => [p.path, p.pathType]),
      [
        ['/desktop/[A-Za-z0-9_-]+/mcp/', 'ImplementationSpecific'],
        ['/gateway/', 'Prefix'],
      ],
    )
    assert.deepEqual(schemaErrors(manifests), [])
  })

  test('existing secret: the keys the configuration needs and the sessions file come from it', async () => {
    const manifests = await render('existing secret')
    assert.ok(!manifests.some((m) => m.kind === 'Secret'), 'the chart creates no Secret')
    // JWKS set, two replicas: the cookie secret, the encryption key and REDIS_URL (no JWT secret).
    const secrets = podSpec(manifests).volumes.find((v) => v.name === 'secrets')?.secret
    assert.equal(secrets?.secretName, 'kasm-runtime-gateway-secrets')
    assert.deepEqual(
      secrets?.items.map((i) => i.key),
      ['GATEWAY_COOKIE_SECRET', 'GATEWAY_ENCRYPTION_KEY', 'REDIS_URL'],
    )
    const listed = await renderWith({
      values: scenarios['existing secret'],
      set: ['secret.existingSecretKeys={GATEWAY_COOKIE_SECRET,GATEWAY_REDIS_SENTINEL_PASSWORD}'],
    })
    assert.deepEqual(
      podSpec(listed)
        .volumes.find((v) => v.name === 'secrets')
        ?.secret?.items.map((i) => i.key),
      ['GATEWAY_COOKIE_SECRET', 'GATEWAY_REDIS_SENTINEL_PASSWORD'],
    )
    const asEnv = await renderWith({
      values: scenarios['existing secret'],
      set: ['secret.mountAsFiles=false'],
    })
    for (const key of ['GATEWAY_JWT_SECRET', 'GATEWAY_COOKIE_SECRET', 'GATEWAY_ENCRYPTION_KEY', 'REDIS_URL'])
      assert.equal(secretRef(asEnv, key).name, 'kasm-runtime-gateway-secrets')
    const pod = podSpec(manifests)
    const volume = pod.volumes.find((v) => v.name === 'sessions')
    assert.deepEqual(volume?.secret?.secretName, 'kasm-runtime-gateway-secrets')
    assert.deepEqual(volume?.secret?.items, [{ key: 'GATEWAY_SESSIONS_FILE', path: 'sessions.yaml' }])
    const mount = pod.containers[0]?.volumeMounts.find((m) => m.name === 'sessions')
    assert.deepEqual(mount, { name: 'sessions', mountPath: '/etc/kasm-runtime-gateway', readOnly: true })
    const env = gatewayContainer(manifests).env ?? []
    assert.equal(
      env.find((e) => e.name === 'GATEWAY_SESSIONS_FILE')?.value,
      '/etc/kasm-runtime-gateway/sessions.yaml',
    )
    const annotations = (
      only(manifests, 'Deployment').spec as { template: { metadata: { annotations: object } } }
    ).template.metadata.annotations
    assert.ok(!('checksum/secret' in annotations))
  })

  test('ingress off, one replica: no Ingress, no PodDisruptionBudget, Redis optional, sessions file mounted', async () => {
    const manifests = await render('ingress off, one replica, sessions file')
    assert.deepEqual(kinds(manifests), [
      'ConfigMap',
      'Deployment',
      'NetworkPolicy',
      'Secret',
      'Service',
      'ServiceAccount',
    ])
    assert.equal((only(manifests, 'Deployment').spec as { replicas: number }).replicas, 1)
    const names = (gatewayContainer(manifests).env ?? []).map((e) => e.name)
    assert.ok(!names.includes('REDIS_URL') && !names.includes('REDIS_URL_FILE'), 'no Redis: embedded mode')
    const data = secretData(manifests)
    assert.equal(data.REDIS_URL, undefined)
    assert.match(data.GATEWAY_SESSIONS_FILE ?? '', /kasmId: kasm-0001/)
  })

  test('HPA on: the autoscaler owns replicas; numbers written as YAML numbers render exactly', async () => {
    const manifests = await render('HPA on')
    const hpa = only(manifests, 'HorizontalPodAutoscaler').spec as {
      minReplicas: number
      maxReplicas: number
      scaleTargetRef: { kind: string; name: string }
      metrics: { resource: { name: string; target: { averageUtilization: number } } }[]
    }
    assert.equal(hpa.minReplicas, 3)
    assert.equal(hpa.maxReplicas, 10)
    assert.deepEqual(hpa.scaleTargetRef.kind, 'Deployment')
    assert.equal(hpa.scaleTargetRef.name, only(manifests, 'Deployment').metadata.name)
    assert.deepEqual(
      hpa.metrics.map((m) => [m.resource.name, m.resource.target.averageUtilization]),
      [
        ['cpu', 60],
        ['memory', 80],
      ],
    )
    assert.ok(!('replicas' in (only(manifests, 'Deployment').spec as object)))
    assert.ok(manifests.some((m) => m.kind === 'PodDisruptionBudget'))
    const config = only(manifests, 'ConfigMap').data as Record<string, string>
    assert.equal(config.GATEWAY_MAX_ATTACHMENT_BYTES, '16777216')
    assert.equal(config.GATEWAY_SHUTDOWN_GRACE_MS, '45000')
    assert.equal(config.GATEWAY_STREAM_EAGER, 'true')
    assert.equal(podSpec(manifests).terminationGracePeriodSeconds, 55)
    const fraction = await renderWith({ set: ['config.GATEWAY_UPSTREAM_RETRY_SCALE=0.5'] })
    assert.equal(
      (only(fraction, 'ConfigMap').data as Record<string, string>).GATEWAY_UPSTREAM_RETRY_SCALE,
      '0.5',
    )
    assert.equal(
      only(manifests, 'Ingress').metadata.annotations?.['nginx.ingress.kubernetes.io/proxy-body-size'],
      '17m',
    )
  })

  test('ServiceMonitor on: scrapes /metrics on the http port; hard anti-affinity; spread and egress rules', async () => {
    const manifests = await render('monitoring on')
    const monitor = only(manifests, 'ServiceMonitor')
    assert.equal(monitor.metadata.labels?.release, 'kube-prometheus-stack')
    const spec = monitor.spec as {
      endpoints: { port: string; path: string }[]
      selector: { matchLabels: object }
    }
    assert.deepEqual(
      spec.endpoints.map((e) => [e.port, e.path]),
      [['http', '/metrics']],
    )
    assert.deepEqual(
      spec.selector.matchLabels,
      (only(manifests, 'Service').spec as { selector: object }).selector,
    )
    const pod = podSpec(manifests)
    assert.ok(pod.affinity?.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution)
    assert.deepEqual(pod.topologySpreadConstraints?.[0]?.labelSelector?.matchLabels, {
      'app.kubernetes.io/name': 'kasm-runtime-gateway',
      'app.kubernetes.io/instance': 'krg',
    })
    const policy = only(manifests, 'NetworkPolicy').spec as { policyTypes: string[]; egress: unknown[] }
    assert.deepEqual(policy.policyTypes, ['Ingress', 'Egress'])
    assert.equal(policy.egress.length, 2)
  })

  test('refuses more than one replica without Redis, with a message that says what to set', async () => {
    for (const set of [['secret.env.REDIS_URL='], ['secret.env.REDIS_URL=', 'autoscaling.enabled=true']]) {
      const stderr = await refusal({ set })
      assert.match(stderr, /secret\.env\.REDIS_URL is required with more than one replica/)
    }
    // One replica without Redis renders.
    await renderWith({ set: ['secret.env.REDIS_URL=', 'replicaCount=1'] })
  })

  test('refuses values the gateway would refuse, naming them', async () => {
    const cases: [string[], RegExp][] = [
      [['config.GATEWAY_NOT_A_VARIABLE=1'], /GATEWAY_NOT_A_VARIABLE/],
      [['config.LOG_LEVEL=loud'], /LOG_LEVEL/],
      [['config.GATEWAY_DEMO=on'], /GATEWAY_DEMO/],
      [['config.PORT=eighty'], /PORT/],
      [['config.GATEWAY_UPSTREAM_TEMPLATE=http://runtime/'], /GATEWAY_UPSTREAM_TEMPLATE/],
      [['secret.env.GATEWAY_ENCRYPTION_KEY=short'], /GATEWAY_ENCRYPTION_KEY/],
      [[`secret.env.GATEWAY_ENCRYPTION_KEY=${'k'.repeat(43)}\\,short`], /GATEWAY_ENCRYPTION_KEY/],
      [['secret.env.REDIS_URL=http://redis:6379'], /REDIS_URL/],
      [['secret.env.GATEWAY_JWT_SECRET=too-short'], /GATEWAY_JWT_SECRET/],
    ]
    for (const [setString, message] of cases) assert.match(await refusal({ setString }), message)
    assert.match(
      await refusal({
        set: ['autoscaling.enabled=true', 'autoscaling.minReplicas=4', 'autoscaling.maxReplicas=2'],
      }),
      /maxReplicas must be at least/,
    )
  })

  test('NOTES name the hosts and never print a Redis password', async () => {
    const result = await helm([
      'install',
      'krg',
      chartDir,
      '--dry-run=client',
      '--namespace',
      'kasm',
      '--values',
      scenarios['HPA on']![0]!,
    ])
    assert.equal(result.code, 0, result.stderr)
    const notes = result.stdout.slice(result.stdout.indexOf('NOTES:'))
    assert.match(notes, /https:\/\/kasm\.example\.com\/desktop\/<kasm_id>\/mcp\//)
    assert.match(notes, /rediss:\/\/\*\*\*@redis\.example\.internal/)
    assert.ok(!notes.includes('change-me'))
  })
})
