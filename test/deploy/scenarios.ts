import assert from 'node:assert/strict'
import { secretFileVariables } from '../../src/config.ts'
import type { Manifest } from './helm.ts'
import { ciValues, helm, only, parseManifests, template, templateArgs } from './helm.ts'

/** The value sets the chart must render: the defaults and the chart's ci/ files. */
export const scenarios: Record<string, string[]> = {
  default: [],
  'existing secret': [ciValues('existing-secret-values.yaml')],
  'ingress off, one replica, sessions file': [ciValues('ingress-off-values.yaml')],
  'Ingress on': [ciValues('ingress-values.yaml')],
  'HPA on': [ciValues('hpa-values.yaml')],
  'monitoring on': [ciValues('servicemonitor-values.yaml')],
  'Gateway API and escape hatches': [ciValues('gateway-api-values.yaml')],
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
  valueFrom?: {
    secretKeyRef?: { name: string; key: string; optional?: boolean }
    fieldRef?: { fieldPath: string }
  }
}

interface Container {
  name: string
  env?: EnvVar[]
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[]
  volumeMounts?: { name: string; mountPath: string }[]
}

interface Volume {
  name: string
  secret?: { secretName: string; items?: { key: string; path: string }[]; optional?: boolean }
}

/** The gateway container of the rendered Deployment. */
export function gatewayContainer(manifests: Manifest[]): Container {
  const spec = only(manifests, 'Deployment').spec as { template: { spec: { containers: Container[] } } }
  const container = spec.template.spec.containers[0]
  if (!container) throw new Error('no container')
  return container
}

/** The pod's volumes. */
export function podVolumes(manifests: Manifest[]): Volume[] {
  return (only(manifests, 'Deployment').spec as { template: { spec: { volumes: Volume[] } } }).template.spec
    .volumes
}

/** The decoded data of a rendered Secret, or `external` for one made outside the chart. */
function secretData(
  manifests: Manifest[],
  name: string,
  external: Record<string, string>,
): Record<string, string> {
  const secret = manifests.find((m) => m.kind === 'Secret' && m.metadata.name === name)
  if (!secret) return external
  return Object.fromEntries(
    Object.entries((secret.data as Record<string, string> | undefined) ?? {}).map(([k, b64]) => [
      k,
      Buffer.from(b64, 'base64').toString('utf8'),
    ]),
  )
}

/**
 * The environment a gateway pod would get from the rendered objects: the ConfigMap(s) of `envFrom`, plain
 * `env` values, and secret keys from the rendered Secret or, for an existing Secret, from `external`.
 * `<NAME>_FILE` pointing into a mounted Secret volume becomes `<NAME>` with the file's content, as the gateway
 * reads it (test/config covers the reading itself). A required key missing from its Secret throws, as the
 * kubelet would refuse to start the container. Values from the downward API are left out.
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
  const mounts = new Map((container.volumeMounts ?? []).map((m) => [m.mountPath, m.name]))
  const volumes = new Map(podVolumes(manifests).map((v) => [v.name, v]))
  for (const v of container.env ?? []) {
    if (v.valueFrom?.fieldRef) continue
    if (v.value !== undefined) {
      const secretName = v.name.endsWith('_FILE') ? v.name.slice(0, -'_FILE'.length) : undefined
      const file = secretName && secretFileVariables.includes(secretName) ? secretFile(v.value) : undefined
      if (file === undefined) env[v.name] = v.value
      else env[v.name.slice(0, -'_FILE'.length)] = file
      continue
    }
    const ref = v.valueFrom?.secretKeyRef
    if (!ref) throw new Error(`env ${v.name} has neither value nor secretKeyRef`)
    const value = secretData(manifests, ref.name, external)[ref.key]
    if (value !== undefined) env[v.name] = value
    else if (ref.optional !== true) throw new Error(`required secret key ${ref.key} missing from ${ref.name}`)
  }
  return env

  /** The content of a file of a mounted Secret volume, or undefined when `path` is not in one. */
  function secretFile(path: string): string | undefined {
    const at = path.lastIndexOf('/')
    const volume = volumes.get(mounts.get(path.slice(0, at)) ?? '')
    if (!volume?.secret) return undefined
    const item = volume.secret.items?.find((i) => i.path === path.slice(at + 1))
    if (!item) throw new Error(`${path}: no such item in the ${volume.name} volume`)
    const value = secretData(manifests, volume.secret.secretName, external)[item.key]
    if (value === undefined)
      throw new Error(`secret key ${item.key} missing from ${volume.secret.secretName}`)
    return value.replace(/\r?\n$/, '')
  }
}

/** `helm template` with these values that must succeed. */
export async function renderWith(opts: {
  values?: string[]
  set?: string[]
  setString?: string[]
}): Promise<Manifest[]> {
  const result = await helm(templateArgs(opts))
  assert.equal(result.code, 0, result.stderr)
  return parseManifests(result.stdout)
}

/** `helm template` that must fail; returns helm's error output. */
export async function refusal(opts: {
  values?: string[]
  set?: string[]
  setString?: string[]
}): Promise<string> {
  const result = await helm(templateArgs(opts))
  assert.notEqual(
    result.code,
    0,
    `expected helm template to fail, it rendered:\n${result.stdout.slice(0, 400)}`,
  )
  return result.stderr
}
