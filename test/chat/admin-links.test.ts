import assert from 'node:assert/strict'
import { test } from 'node:test'
import { bearer } from '../helpers/jwt.ts'
import { link, messageAbout, OLIVIA, startSlackStack } from './helpers.ts'

/**
 * `GET admin/chat-links` tells an admin only what is theirs to know: a person linked in teams blue and red,
 * listed to an admin of blue, shows blue alone.
 */

test("an admin of one of a linked person's teams sees that team only, never the person's others", async (t) => {
  const stack = await startSlackStack(t)
  const title = 'Which browser?'
  stack.rt.ask({ title, fields: [{ id: 'b', type: 'string', required: true, enum: ['chrome', 'firefox'] }] })
  // Olivia is an operator of blue and red.
  await link(stack, OLIVIA, await messageAbout(stack, title), 'olivia', 'krg:choose:0')

  const listedTo = async (teams: string[]) => {
    const token = await bearer({ sub: `admin-${teams.join('-')}`, roles: ['admin'], teams })
    const res = await fetch(`${stack.base}admin/chat-links`, {
      headers: { authorization: `Bearer ${token}` },
    })
    assert.equal(res.status, 200)
    const { links } = (await res.json()) as { links: { sub: string; roles: string[]; teams: string[] }[] }
    return links.map((l) => [l.sub, l.roles, l.teams])
  }
  assert.deepEqual(await listedTo(['blue']), [['olivia', ['operator'], ['blue']]])
  assert.deepEqual(await listedTo(['red', 'green']), [['olivia', ['operator'], ['red']]])
  assert.deepEqual(await listedTo(['green']), [])
  assert.deepEqual(await listedTo(['*']), [['olivia', ['operator'], ['blue', 'red']]])
  assert.deepEqual(await listedTo(['blue', 'red']), [['olivia', ['operator'], ['blue', 'red']]])

  // The person's own list names all of their teams.
  const olivia = await bearer({ sub: 'olivia', roles: ['operator'], teams: ['blue', 'red'] })
  const own = await fetch(`${stack.base}api/chat-links`, { headers: { authorization: `Bearer ${olivia}` } })
  const { links } = (await own.json()) as { links: { teams: string[] }[] }
  assert.deepEqual(
    links.map((l) => l.teams),
    [['blue', 'red']],
  )
})
