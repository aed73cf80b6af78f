// test-runner: one leg (what is checked is the Kasm deployment files and manifests: nothing of them runs on the Node)
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from 'node:test'
import { parse } from 'yaml'
import { chartDir, type Manifest, parseManifests, root } from './helm.ts'
import { schemaErrors, unknownFieldErrors } from './kube-validate.ts'

/** The directives of the `location` block that proxies to the gateway, in order. */
function gatewayLocation(conf: string): { pattern: string; directives: string[] } {
  const m = /location ~ "([^"]+)" \{([^}]*)\}/.exec(conf)
  assert.ok(m, 'a regex location for the gateway')
  const directives = m[2]!
    .split('\n')
    .map((l) => l.replace(/#.*$/, '').trim())
    .filter((l) => l !== '')
  return { pattern: m[1]!, directives }
}

test('deploy/kasm/nginx-location.conf proxies the gateway path exactly as the tested demo proxy does', async () => {
  const kasm = gatewayLocation(await readFile(join(root, 'deploy/kasm/nginx-location.conf'), 'utf8'))
  const demo = gatewayLocation(await readFile(join(root, 'deploy/nginx/demo.conf'), 'utf8'))
  assert.deepEqual(kasm, demo)
})

test("deploy/kasm/nginx-location.conf sends the gateway's base path there too, as the event path is sent, admin API aside", async () => {
  const conf = await readFile(join(root, 'deploy/kasm/nginx-location.conf'), 'utf8')
  const block = (selector: string) => {
    const m = new RegExp(`location ${selector} \\{([^}]*)\\}`).exec(conf)
    assert.ok(m, `location ${selector}`)
    return m[1]!
      .split('\n')
      .map((l) => l.replace(/#.*$/, '').trim())
      .filter((l) => l !== '')
  }
  assert.deepEqual(block('/gateway/'), gatewayLocation(conf).directives)
  assert.deepEqual(block('= /gateway'), ['return 308 /gateway/;'])
  assert.deepEqual(block('/gateway/admin/'), ['return 404;'])
})

test('deploy/kasm/ingress.yaml validates against the Kubernetes schemas and matches the chart', async () => {
  const manifests: Manifest[] = parseManifests(await readFile(join(root, 'deploy/kasm/ingress.yaml'), 'utf8'))
  assert.deepEqual(
    manifests.map((m) => m.kind),
    ['Service', 'Ingress', 'Ingress'],
  )
  assert.deepEqual(schemaErrors(manifests), [])
  assert.deepEqual(await unknownFieldErrors(manifests), [])
  const values = parse(await readFile(join(chartDir, 'values.yaml'), 'utf8')) as {
    ingress: { kasmPath: string }
  }
  const gatewayRule = manifests[1]?.spec as {
    rules: { http: { paths: { path: string; pathType: string }[] } }[]
  }
  const [path, basePath] = gatewayRule.rules[0]?.http.paths ?? []
  assert.equal(path?.path, values.ingress.kasmPath)
  assert.equal(path?.pathType, 'ImplementationSpecific')
  // What the chart renders for config.GATEWAY_BASE_PATH=/gateway/.
  assert.deepEqual([basePath?.path, basePath?.pathType], ['/gateway/', 'Prefix'])
  assert.equal(manifests[1]?.metadata.annotations?.['nginx.ingress.kubernetes.io/proxy-buffering'], 'off')
})
