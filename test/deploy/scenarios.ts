import type { Manifest } from './helm.ts'
import { ciValues, only, template } from './helm.ts'

/** The value sets the chart must render: the defaults and the chart's ci/ files. */
export const scenarios: Record<string, string[]> = {
  default: [],
  'existing secret': [ciValues('existing-secret-values.yaml')],
  'ingress off, one replica, sessions file': [ciValues('ingress-off-values.yaml')],
  'HPA on': [ciValues('hpa-values.yaml')],
  'ServiceMonitor on': [ciValues('servicemonitor-values.yaml')],
}

const cache = new Map<string, Promise<Manifest[]>>()

/** Renders a scenario once per test file (helm template is deterministic apart from generated secrets). */
export function render(name: string): Promise<Manifest[]> {
  const values = scenarios[name]
  if (!values) throw new Error(`unknown scenario ${name}`)
  let out = cache.get(name)
  if (!out) {
    out = template({ values })
    cache.set(name, out)
  }
  return out
}

interface EnvVar {
  name: string
  value?: string
  valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean } }
}

interface Container {
  name: string
  env?: EnvVar[]
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[]
}

/** The gateway container of the rendered Deployment. */
export function gatewayContainer(manifests: Manifest[]): Container {
  const spec = only(manifests, 'Deployment').spec as { template: { spec: { containers: Container[] } } }
  const container = spec.template.spec.containers[0]
  if (!container) throw new Error('no container')
  return container
}

/**
 * The environment a gateway pod would get from the rendered objects: the ConfigMap(s) of `envFrom`, plain
 * `env` values, and secret keys from the rendered Secret or, for an existing Secret, from `external`.
 * A required key missing from its Secret throws, as the kubelet would refuse to start the container.
 */
export function podEnvironment(
  manifests: Manifest[],
  external: Record<string, string> = {},
): Record<string, string> {
  const container = gatewayContainer(manifests)
  const env: Record<string, string> = {}
  for (const source of container.envFrom ?? []) {
    const name = source.configMapRef?.name
    if (!name) throw new Error('only configMapRef envFrom is expected')
    const map = manifests.find((m) => m.kind === 'ConfigMap' && m.metadata.name === name)
    if (!map) throw new Error(`envFrom names a ConfigMap that is not rendered: ${name}`)
    Object.assign(env, (map.data as Record<string, string> | undefined) ?? {})
  }
  for (const v of container.env ?? []) {
    if (v.value !== undefined) {
      env[v.name] = v.value
      continue
    }
    const ref = v.valueFrom?.secretKeyRef
    if (!ref) throw new Error(`env ${v.name} has neither value nor secretKeyRef`)
    const secret = manifests.find((m) => m.kind === 'Secret' && m.metadata.name === ref.name)
    const data = secret
      ? Object.fromEntries(
          Object.entries((secret.data as Record<string, string> | undefined) ?? {}).map(([k, b64]) => [
            k,
            Buffer.from(b64, 'base64').toString('utf8'),
          ]),
        )
      : external
    const value = data[ref.key]
    if (value !== undefined) env[v.name] = value
    else if (ref.optional !== true) throw new Error(`required secret key ${ref.key} missing from ${ref.name}`)
  }
  return env
}
