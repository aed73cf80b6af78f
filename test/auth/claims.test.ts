import assert from 'node:assert/strict'
import { test } from 'node:test'
import { claimAt, operatorClaims } from '../../src/auth/claims.ts'

test('claimAt reads a plain name, a dotted path, and a URL-like name with dots', () => {
  const payload = {
    roles: ['viewer'],
    realm_access: { roles: ['admin'] },
    'https://kasm.example/teams': ['red'],
    'https://ns.example/claims': { roles: ['operator'] },
  }
  assert.deepEqual(claimAt(payload, 'roles'), ['viewer'])
  assert.deepEqual(claimAt(payload, 'realm_access.roles'), ['admin'])
  assert.deepEqual(claimAt(payload, 'https://kasm.example/teams'), ['red'])
  assert.deepEqual(claimAt(payload, 'https://ns.example/claims.roles'), ['operator'])
  assert.equal(claimAt(payload, 'realm_access.missing'), undefined)
  assert.equal(claimAt(payload, 'roles.length'), undefined, 'arrays are not walked into')
})

test('claimAt prefers the whole name over the dotted path', () => {
  const payload = { 'a.b': ['whole'], a: { b: ['nested'] } }
  assert.deepEqual(claimAt(payload, 'a.b'), ['whole'])
})

test('claimAt reads only own properties', () => {
  const payload = JSON.parse('{"sub":"x"}') as Record<string, unknown>
  assert.equal(claimAt(payload, 'constructor'), undefined)
  assert.equal(claimAt(payload, '__proto__.toString'), undefined)
  assert.equal(claimAt(payload, 'sub.length'), undefined)
})

test('operatorClaims keeps known roles, dedupes teams, takes name or preferred_username', () => {
  const claims = operatorClaims(
    {
      sub: 'u1',
      preferred_username: 'Uno',
      realm_access: { roles: ['offline_access', 'operator', 'admin'] },
      groups: 'red blue red',
    },
    { roles: 'realm_access.roles', teams: 'groups' },
  )
  assert.deepEqual(claims, { sub: 'u1', name: 'Uno', roles: ['operator', 'admin'], teams: ['red', 'blue'] })
  const none = operatorClaims({ sub: 'u2' }, { roles: 'roles', teams: 'teams' })
  assert.deepEqual(none, { sub: 'u2', roles: [], teams: [] })
})
