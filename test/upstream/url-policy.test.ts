import assert from 'node:assert/strict'
import { test } from 'node:test'
import { runtimeOf } from '../../src/sessions/upstream-admission.ts'
import { parseAllowList, refusedRange, UrlPolicy } from '../../src/upstream/url-policy.ts'
import { tableLookup } from '../fixtures/dns.ts'

test('refused by default: loopback, link-local, unspecified, multicast, metadata, in every spelling', async () => {
  const policy = new UrlPolicy({ allow: [], lookup: tableLookup({ localhost: ['127.0.0.1', '::1'] }) })
  const refused = [
    'http://127.0.0.1:9434/',
    'http://0x7f000001/',
    'http://2130706433/',
    'http://0177.0.0.1/',
    'http://127.1/',
    'http://localhost/',
    'http://localhost./',
    'http://[::1]/',
    'http://0.0.0.0/',
    'http://[::]/',
    'http://169.254.169.254/latest/meta-data/',
    'http://[::ffff:169.254.169.254]/',
    'http://[::ffff:a9fe:a9fe]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::127.0.0.1]/',
    'http://[64:ff9b::7f00:1]/',
    'http://[2002:7f00:1::]/',
    'http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/',
    'http://[fe80::1]/',
    'http://224.0.0.1/',
    'http://[ff02::1]/',
    'http://255.255.255.255/',
    'http://240.0.0.1/',
    'http://100.100.100.200/',
    'http://168.63.129.16/',
    'http://[fd00:ec2::254]/',
  ]
  for (const url of refused) {
    const refusal = await policy.check(url)
    assert.equal(refusal?.code, 'address_refused', url)
  }
  for (const url of [
    'http://10.0.0.5:9434/',
    'http://192.168.1.9/',
    'http://[fd12::5]/',
    'http://100.64.0.9/',
  ]) {
    assert.equal(await policy.check(url), undefined, url)
  }
  // Not resolvable yet: accepted, and judged on every connection once it resolves.
  assert.equal(await policy.check('http://nowhere.invalid/'), undefined)
  assert.equal((await policy.check('ftp://10.0.0.5/'))?.code, 'not_http')
})

test('GATEWAY_UPSTREAM_ALLOW: hosts, *.domain and CIDRs; a CIDR is what allows a refused range', async () => {
  const lookup = tableLookup({
    'runtime.internal': ['10.1.0.5'],
    'a.kasm.internal': ['10.2.0.5'],
    'b.a.kasm.internal': ['10.2.0.6'],
    'kasm.internal': ['10.2.0.1'],
    'elsewhere.test': ['10.3.0.1'],
    'in-cidr.test': ['10.9.0.1'],
    'rebound.kasm.internal': ['127.0.0.1'],
    'sidecar.test': ['127.0.0.2'],
  })
  const policy = new UrlPolicy({
    allow: parseAllowList(['runtime.internal', '*.kasm.internal', '10.9.0.0/16', '127.0.0.2']),
    lookup,
  })
  for (const url of [
    'http://runtime.internal/',
    'http://a.kasm.internal/',
    'http://b.a.kasm.internal/',
    'http://in-cidr.test/',
    'http://10.9.4.4/',
    'http://sidecar.test/',
  ]) {
    assert.equal(await policy.check(url), undefined, url)
  }
  for (const url of ['http://kasm.internal/', 'http://elsewhere.test/', 'http://10.3.0.1/']) {
    assert.equal((await policy.check(url))?.code, 'host_not_allowed', url)
  }
  // A listed name still may not resolve to a refused range: only a CIDR (the deployer, explicitly) allows it.
  assert.equal((await policy.check('http://rebound.kasm.internal/'))?.code, 'address_refused')
  assert.throws(() => parseAllowList(['not a host']), /"not a host"/)
  assert.throws(() => parseAllowList(['10.0.0.0/99']), /CIDR/)
})

test('the template origin is trusted; the same host on another port is not', async () => {
  const policy = new UrlPolicy({ allow: [], trustedOrigins: ['http://127.0.0.1:8081'] })
  assert.equal(await policy.check('http://127.0.0.1:8081/desktop/k9/mcp/'), undefined)
  assert.equal((await policy.check('http://127.0.0.1:6379/'))?.code, 'address_refused')
})

test('refusedRange names what it refuses', () => {
  assert.equal(refusedRange('127.0.0.1'), 'a loopback address')
  assert.equal(refusedRange('::ffff:169.254.169.254'), 'a cloud metadata address (in an IPv6 form)')
  assert.equal(refusedRange('10.0.0.1'), undefined)
})

test('two spellings of one runtime base are one runtime; another path is another', () => {
  const same = [
    'http://Runtime.Test:80/desktop/r1/mcp/',
    'http://runtime.test/desktop/r1/mcp',
    'http://runtime.test./desktop//r1/mcp/',
    'http://runtime.test/desktop/%72%31/mcp/',
    'http://runtime.test/desktop/x/../r1/mcp/',
  ]
  for (const url of same) assert.equal(runtimeOf(url).key, runtimeOf(same[0] as string).key, url)
  assert.notEqual(runtimeOf('http://runtime.test/desktop/r2/mcp/').key, runtimeOf(same[0] as string).key)
  assert.notEqual(runtimeOf('https://runtime.test/desktop/r1/mcp/').key, runtimeOf(same[0] as string).key)
})
