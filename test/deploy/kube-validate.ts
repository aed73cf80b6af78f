import { randomUUID } from 'node:crypto'
import { mkdir, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { HTTPRoute } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1'
import {
  PrometheusRule,
  ServiceMonitor,
} from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1'
import { Deployment } from 'kubernetes-models/apps/v1'
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2'
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1'
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1'
import { ConfigMap, Secret, Service, ServiceAccount } from 'kubernetes-models/v1'
import ts from 'typescript'
import type { Manifest } from './helm.ts'
import { root } from './helm.ts'

interface Validatable {
  validate(): void
}

/** Every kind the chart renders, with its schema (kubernetes-models: the Kubernetes OpenAPI schemas). */
const models: Record<string, (data: Manifest) => Validatable> = {
  'v1/ConfigMap': (d) => new ConfigMap(d as never),
  'v1/Secret': (d) => new Secret(d as never),
  'v1/Service': (d) => new Service(d as never),
  'v1/ServiceAccount': (d) => new ServiceAccount(d as never),
  'apps/v1/Deployment': (d) => new Deployment(d as never),
  'networking.k8s.io/v1/Ingress': (d) => new Ingress(d as never),
  'networking.k8s.io/v1/NetworkPolicy': (d) => new NetworkPolicy(d as never),
  'autoscaling/v2/HorizontalPodAutoscaler': (d) => new HorizontalPodAutoscaler(d as never),
  'policy/v1/PodDisruptionBudget': (d) => new PodDisruptionBudget(d as never),
  'monitoring.coreos.com/v1/ServiceMonitor': (d) => new ServiceMonitor(d as never),
  'monitoring.coreos.com/v1/PrometheusRule': (d) => new PrometheusRule(d as never),
  'gateway.networking.k8s.io/v1/HTTPRoute': (d) => new HTTPRoute(d as never),
}

/** The same kinds as TypeScript types (kubernetes-types), for the unknown-field check. */
const types: Record<string, string> = {
  'v1/ConfigMap': 'core.ConfigMap',
  'v1/Secret': 'core.Secret',
  'v1/Service': 'core.Service',
  'v1/ServiceAccount': 'core.ServiceAccount',
  'apps/v1/Deployment': 'apps.Deployment',
  'networking.k8s.io/v1/Ingress': 'networking.Ingress',
  'networking.k8s.io/v1/NetworkPolicy': 'networking.NetworkPolicy',
  'autoscaling/v2/HorizontalPodAutoscaler': 'autoscaling.HorizontalPodAutoscaler',
  'policy/v1/PodDisruptionBudget': 'policy.PodDisruptionBudget',
  // Custom resources: the models' TypeScript interfaces, generated from the CRDs' schemas.
  'monitoring.coreos.com/v1/ServiceMonitor': 'monitoring.IServiceMonitor',
  'monitoring.coreos.com/v1/PrometheusRule': 'monitoringRule.IPrometheusRule',
  'gateway.networking.k8s.io/v1/HTTPRoute': 'gatewayApi.IHTTPRoute',
}

const typeImports = [
  "import type * as core from 'kubernetes-types/core/v1'",
  "import type * as apps from 'kubernetes-types/apps/v1'",
  "import type * as networking from 'kubernetes-types/networking/v1'",
  "import type * as autoscaling from 'kubernetes-types/autoscaling/v2'",
  "import type * as policy from 'kubernetes-types/policy/v1'",
  "import type * as monitoring from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor'",
  "import type * as monitoringRule from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule'",
  "import type * as gatewayApi from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/HTTPRoute'",
]

function kindOf(m: Manifest): string {
  return `${m.apiVersion}/${m.kind}`
}

/**
 * Validates each manifest against its Kubernetes JSON schema (types, required fields, formats). Returns one
 * message per problem; an unknown kind is a problem too.
 */
export function schemaErrors(manifests: Manifest[]): string[] {
  const errors: string[] = []
  for (const m of manifests) {
    const model = models[kindOf(m)]
    if (!model) {
      errors.push(`${kindOf(m)} ${m.metadata?.name}: no schema for this kind`)
      continue
    }
    try {
      model(m).validate()
    } catch (err) {
      errors.push(`${kindOf(m)} ${m.metadata.name}: ${(err as Error).message}`)
    }
  }
  return errors
}

/**
 * The schemas above accept fields they do not know, as the OpenAPI documents do; the API server (strict
 * field validation) and a reader do not. This compiles every manifest as an object literal typed with
 * kubernetes-types (custom resources: the models' interfaces), so TypeScript's excess-property check names any
 * unknown or misspelt field.
 */
export async function unknownFieldErrors(manifests: Manifest[]): Promise<string[]> {
  const dir = join(root, 'node_modules/.cache/krg-kube-types')
  await mkdir(dir, { recursive: true })
  // Unique per call: two checks of one process can start in the same millisecond (the chart's tests run
  // concurrently), and one would read the other's file.
  const file = join(dir, `manifests-${process.pid}-${randomUUID()}.ts`)
  const lines = [...typeImports]
  const names: string[] = []
  manifests.forEach((m, i) => {
    const type = types[kindOf(m)]
    if (!type) return
    names.push(`${kindOf(m)} ${m.metadata.name}`)
    lines.push(`export const m${i}: ${type} = ${JSON.stringify(m, null, 1)}`)
  })
  await writeFile(file, `${lines.join('\n')}\n`)
  try {
    return diagnose(file)
  } finally {
    await rm(file, { force: true })
  }
}

function diagnose(file: string): string[] {
  const program = ts.createProgram([file], {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    target: ts.ScriptTarget.ES2022,
  })
  // A check that read nothing would pass everything: make sure the manifests and the types were both read.
  const source = program.getSourceFile(file)
  if (source === undefined || source.statements.length < 2)
    throw new Error(`the unknown-field check did not read ${file}`)
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const message = ts.flattenDiagnosticMessageText(d.messageText, '\n')
    if (d.file && d.start !== undefined) {
      const { line } = d.file.getLineAndCharacterOfPosition(d.start)
      return `${d.file.text.split('\n')[line]?.trim()} -> ${message}`
    }
    return message
  })
}
