import assert from 'node:assert/strict'
import { test } from 'node:test'
import { request } from 'undici'
import { csvCell } from '../../src/report/csv.ts'
import type { QuestionStats, Report } from '../../src/report/stats.ts'
import type { HandoffRecord, OpenedRecord, QuestionRecord } from '../../src/report/types.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { questionRecord } from './helpers.ts'

/** The report's routes: who may read what, the refusals, and the CSV, from records in the real store. */

const now = Date.now()
const iso = (agoS: number) => new Date(now - agoS * 1000).toISOString()

function question(id: string, team: string, extra: Partial<QuestionRecord> = {}): QuestionRecord {
  return questionRecord(id, team, now, extra)
}

async function start(t: { after(fn: () => unknown): void }) {
  const gw = await startGateway()
  t.after(() => gw.close())
  const store = gw.app.teamReport.store
  const handoff: HandoffRecord = {
    kind: 'handoff',
    id: JSON.stringify(['handoff', 'k1', 'run-1']),
    team: 'blue',
    kasmId: 'k1',
    run: 'run-1',
    reason: 'a login, only a person may do it',
    openedAt: iso(400),
    closedAt: iso(340),
    endedBy: 'operator',
    waitS: 60,
    sub: 'dan',
    name: 'Dan',
    via: 'sidebar',
  }
  for (const record of [
    question('q1', 'blue'),
    question('q2', 'blue', {
      title: '=HYPERLINK("http://evil.example","click") , "quoted"\nline',
      closedBy: 'timeout',
      sub: null,
      name: null,
      via: null,
      closedAt: iso(290),
    }),
    question('q3', 'blue', { name: '+Eve, "the" @admin', sub: '-eve', closedAt: iso(3 * 86_400) }),
    question('r1', 'red'),
    handoff,
  ])
    assert.equal(await store.add(record), true)
  assert.equal(await store.add(question('q1', 'blue')), false, 'a record is added once')
  return gw
}

const get = async (url: string, token: string | null, headers: Record<string, string> = {}) => {
  const res = await request(url, {
    headers: { ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...headers },
  })
  const raw = Buffer.from(await res.body.arrayBuffer())
  return { status: res.statusCode, headers: res.headers, raw, text: raw.toString('utf8') }
}

test('refusals: anonymous 401, a viewer 403, a foreign team 404, a bad window or team 400', async (t) => {
  const gw = await start(t)
  const viewer = await bearer({ sub: 'val', roles: ['viewer'], teams: ['blue'] })
  const blue = await bearer({ sub: 'dan', roles: ['operator'], teams: ['blue'] })
  const cases: [string, string | null, number, string][] = [
    ['/api/report', null, 401, 'unauthenticated'],
    ['/api/report.csv', null, 401, 'unauthenticated'],
    ['/api/report', viewer, 403, 'forbidden'],
    ['/api/report.csv', viewer, 403, 'forbidden'],
    ['/api/report?team=red', blue, 404, 'team_not_found'],
    ['/api/report.csv?team=red', blue, 404, 'team_not_found'],
    ['/api/report?team=nobody', blue, 404, 'team_not_found'],
    ['/api/report?window=30d', blue, 400, 'report_window_invalid'],
    ['/api/report.csv?window=1h', blue, 400, 'report_window_invalid'],
    ['/api/report?team=%20', blue, 400, 'bad_request'],
    ['/api/report?window=7d&window=24h', blue, 400, 'bad_request'],
  ]
  for (const [path, token, status, code] of cases) {
    const res = await get(`${gw.url}${path}`, token)
    assert.equal(res.status, status, `${path}: ${res.text}`)
    assert.equal((JSON.parse(res.text) as { error: string }).error, code, path)
    assert.ok(!res.text.includes('Question'), `${path} says nothing of the records`)
  }
})

test('an operator sees their teams only; an admin of every team sees all; the window is kept', async (t) => {
  const gw = await start(t)
  const blue = await bearer({ sub: 'dan', roles: ['operator'], teams: ['blue'] })
  const everyone = await bearer({ sub: 'root', roles: ['admin'], teams: ['*'] })
  const day = JSON.parse((await get(`${gw.url}/api/report`, blue)).text) as Report
  assert.equal(day.window, '24h')
  assert.deepEqual(
    day.teams.map((x) => x.team),
    ['blue'],
  )
  assert.equal(day.all.questions.questions, 2, 'q3 closed three days ago: not in the last 24 hours')
  assert.equal(day.all.questions.answered, 1)
  assert.equal(day.all.questions.inTimeShare, 0.5)
  assert.deepEqual(
    day.timeouts.map((x) => x.requestId),
    ['q2'],
  )
  assert.equal(day.all.handoffs.byPerson, 1)
  const week = JSON.parse((await get(`${gw.url}/api/report?window=7d&team=blue`, blue)).text) as Report
  assert.equal(week.all.questions.questions, 3)
  assert.equal(week.series.length, 28, 'six-hour buckets over 7 days')
  const all = JSON.parse((await get(`${gw.url}/api/report?window=7d`, everyone)).text) as Report
  assert.deepEqual(
    all.teams.map((x) => x.team),
    ['blue', 'red'],
  )
  assert.equal(all.all.questions.questions, 4)
})

test('where the questions went adds up: overall, per team, per person; still open counts a registered session only', async (t) => {
  const gw = await start(t)
  const store = gw.app.teamReport.store
  const opened = (kasmId: string, team: string, requestId: string, agoS: number): OpenedRecord => ({
    kind: 'opened',
    id: JSON.stringify(['opened', kasmId, 'run-1', requestId]),
    team,
    kasmId,
    run: 'run-1',
    requestId,
    title: `Open ${requestId}`,
    openedAt: iso(agoS),
    deadline: null,
  })
  await gw.app.sessions.put({
    kasmId: 'k1',
    upstream: 'http://127.0.0.1:9/',
    team: 'blue',
    messagingToken: 'a-token-for-the-report-tests',
    source: 'admin',
  })
  for (const record of [
    // q1 opened and closed: counted once, as answered.
    opened('k1', 'blue', 'q1', 600),
    opened('k1', 'blue', 'o1', 120),
    opened('k1', 'blue', 'o2', 60),
    // Before the window: not asked in it.
    opened('k1', 'blue', 'o3', 2 * 86_400),
    // Its session was removed (k2 is not registered): it will never close here.
    opened('k2', 'red', 'o4', 60),
    question('c1', 'blue', { closedBy: 'cancel', sub: null, name: null, via: null }),
    question('e1', 'blue', { closedBy: 'run_end', sub: null, name: null, via: null }),
    question('x1', 'blue', { closedBy: 'other', sub: null, name: null, via: null }),
    question('l1', 'blue', { closedAt: iso(200), sub: 'eve', name: 'Eve' }),
  ])
    assert.equal(await store.add(record), true)
  const everyone = await bearer({ sub: 'root', roles: ['admin'], teams: ['*'] })
  const report = JSON.parse((await get(`${gw.url}/api/report`, everyone)).text) as Report
  const parts = (q: QuestionStats) => [
    q.inTime,
    q.late,
    q.timeouts,
    q.cancelled,
    q.runEnded,
    q.other,
    q.stillOpen,
  ]
  const sum = (q: QuestionStats) => parts(q).reduce((a, b) => a + b, 0)
  const all = report.all.questions
  assert.deepEqual(parts(all), [2, 1, 1, 1, 1, 1, 2], 'in time q1 r1, late l1, q2, c1, e1, x1, open o1 o2')
  assert.equal(all.questions, 9)
  for (const group of [
    report.all,
    ...report.teams,
    ...report.all.people,
    ...report.teams.flatMap((x) => x.people),
  ]) {
    const q = group.questions
    const who = 'team' in group ? `team ${group.team || '(all)'}` : `person ${group.sub}`
    assert.equal(sum(q), q.questions, `${who}: the parts add up`)
    assert.equal(q.inTime + q.late, q.answered, `${who}: answered in time or late`)
    assert.equal(q.answered + q.timeouts, q.waited, `${who}: the in-time share's denominator`)
  }
  assert.deepEqual(
    report.teams.map((x) => [x.team, x.questions.questions, x.questions.stillOpen]),
    [
      ['blue', 8, 2],
      ['red', 1, 0],
    ],
  )
  assert.equal(all.waited, 4)
  assert.equal(all.inTimeShare, 0.5)

  // The CSV has a row for each question that went somewhere, the open ones too.
  const csv = parseCsv((await get(`${gw.url}/api/report.csv`, everyone)).text.slice(1))
  const [header, ...rows] = csv as string[][]
  const closedBy = (header as string[]).indexOf('closed_by')
  const kind = (header as string[]).indexOf('kind')
  assert.equal(rows.filter((r) => r[kind] === 'question').length, all.questions)
  assert.deepEqual(
    rows.filter((r) => r[closedBy] === 'open').map((r) => r[(header as string[]).indexOf('request_id')]),
    ['o1', 'o2'],
  )
})

test('the CSV: every record of the window, RFC 4180 quoting, formulas neutralised, a download', async (t) => {
  const gw = await start(t)
  const blue = await bearer({ sub: 'dan', roles: ['operator'], teams: ['blue'] })
  const res = await get(`${gw.url}/api/report.csv?window=7d&team=blue`, blue)
  assert.equal(res.status, 200)
  assert.equal(res.headers['content-type'], 'text/csv; charset=utf-8')
  assert.match(
    String(res.headers['content-disposition']),
    /^attachment; filename="krg-report-blue-7d-\d{4}-\d{2}-\d{2}\.csv"$/,
  )
  assert.equal(res.headers['cache-control'], 'no-store')
  assert.deepEqual([...res.raw.subarray(0, 3)], [0xef, 0xbb, 0xbf], 'a UTF-8 byte order mark')
  assert.ok(res.text.startsWith('\uFEFFkind,team,kasm_id,run,request_id,title,opened_at,closed_at,'))
  const lines = res.text.slice(1).split('\r\n')
  assert.equal(lines.at(-1), '', 'every line ends with CRLF')
  const rows = parseCsv(res.text.slice(1))
  assert.equal(rows.length, 5, 'a header and four records of team blue (red is not asked for)')
  const [header, ...records] = rows as string[][]
  const col = (row: string[], name: string) => row[(header as string[]).indexOf(name)]
  const byRequest = new Map(records.map((r) => [col(r, 'request_id') || col(r, 'kind'), r]))
  const evil = byRequest.get('q2') as string[]
  assert.equal(col(evil, 'title'), `'=HYPERLINK("http://evil.example","click") , "quoted"\nline`)
  assert.equal(col(evil, 'closed_by'), 'timeout')
  assert.equal(col(evil, 'in_time'), '')
  const eve = byRequest.get('q3') as string[]
  assert.equal(col(eve, 'name'), `'+Eve, "the" @admin`)
  assert.equal(col(eve, 'sub'), "'-eve")
  const q1 = byRequest.get('q1') as string[]
  assert.deepEqual([col(q1, 'in_time'), col(q1, 'seconds'), col(q1, 'via')], ['yes', '60', 'console'])
  const q1Line = lines.find((l) => l.includes('"q1"')) ?? ''
  assert.match(q1Line, /^"question","blue","k1","run-1","q1","Question q1",/, 'every text cell quoted')
  assert.match(q1Line, /,"yes",60,"console","dan","Dan",,$/, 'a number is not')
  const handoff = byRequest.get('handoff') as string[]
  assert.deepEqual(
    [col(handoff, 'closed_by'), col(handoff, 'seconds'), col(handoff, 'title')],
    ['operator', '60', 'a login, only a person may do it'],
  )
  // A day's CSV leaves out q3.
  const day = parseCsv((await get(`${gw.url}/api/report.csv`, blue)).text.slice(1))
  assert.equal(day.length, 4)
})

test('csvCell: quotes every text cell, guards a formula start in every part, leaves numbers alone', () => {
  assert.equal(csvCell('plain'), '"plain"')
  assert.equal(csvCell('a,b'), '"a,b"')
  assert.equal(csvCell('say "hi"'), '"say ""hi"""')
  assert.equal(csvCell('two\r\nlines'), '"two\r\nlines"')
  assert.equal(csvCell(' padded'), '" padded"')
  assert.equal(csvCell('=cmd'), `"'=cmd"`)
  // A spreadsheet whose separator is `;` (or that splits on `,` inside the quotes) runs each part on its own.
  assert.equal(csvCell('x;=1+1'), `"x;'=1+1"`)
  assert.equal(csvCell('a,@SUM(1)'), `"a,'@SUM(1)"`)
  assert.equal(csvCell('x; +1;  -2'), `"x; '+1;  '-2"`)
  assert.equal(csvCell('x;"=1+1'), `"x;""'=1+1"`, 'a quote before the formula does not hide it')
  assert.equal(csvCell('a\n=1'), `"a\n'=1"`, 'nor a line break, for a reader that ignores quotes')
  assert.equal(csvCell('2026-01-02T03:04:05.000Z'), '"2026-01-02T03:04:05.000Z"', 'a hyphen inside stays')
  assert.equal(csvCell('a - b, c-d'), '"a - b, c-d"')
  for (const start of ['=', '+', '-', '@', '\t', '\r'])
    assert.equal(csvCell(`${start}1+1`), `"'${start}1+1"`, JSON.stringify(start))
  assert.equal(csvCell(-5), '-5')
  assert.equal(csvCell(12.5), '12.5')
  assert.equal(csvCell(null), '')
})

test('the page <base>report: an operator gets it under the strict CSP, a viewer the 403 page', async (t) => {
  const gw = await startGateway()
  t.after(() => gw.close())
  const sessionOf = async (roles: string[]) => {
    const token = await bearer({ sub: `p-${roles[0]}`, roles, teams: ['blue'] })
    const res = await request(`${gw.url}/auth/session`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    })
    await res.body.dump()
    return String(res.headers['set-cookie']).split(';')[0] as string
  }
  const navigation = { accept: 'text/html', 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document' }
  const page = await get(`${gw.url}/report`, null, { ...navigation, cookie: await sessionOf(['operator']) })
  assert.equal(page.status, 200)
  assert.match(
    String(page.headers['content-security-policy']),
    /^default-src 'none'; script-src 'self'; style-src 'self'/,
  )
  assert.match(page.text, /<title>Report · kasm-runtime-gateway<\/title>/)
  const script = /src="\/assets\/(report-[A-Z0-9]{8}\.js)"/.exec(page.text)?.[1]
  assert.ok(script, 'the report bundle, not the console one')
  assert.match(page.text, /href="\/assets\/report-[A-Z0-9]{8}\.css"/)
  assert.equal((await get(`${gw.url}/assets/${script}`, null)).status, 200)
  const refused = await get(`${gw.url}/report`, null, { ...navigation, cookie: await sessionOf(['viewer']) })
  assert.equal(refused.status, 403)
  assert.match(String(refused.headers['content-type']), /^text\/html/)
  assert.match(refused.text, /operators and admins/)
  const program = await get(`${gw.url}/report`, null, { cookie: await sessionOf(['viewer']) })
  assert.equal(program.status, 403)
  assert.equal((JSON.parse(program.text) as { error: string }).error, 'forbidden')
})

/** A strict RFC 4180 reader (quotes, doubled quotes, CRLF records), to check what a spreadsheet would see. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = []
  let row: string[] = []
  let cell = ''
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const ch = text[i] as string
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        cell += '"'
        i++
      } else if (ch === '"') quoted = false
      else cell += ch
    } else if (ch === '"') quoted = true
    else if (ch === ',') {
      row.push(cell)
      cell = ''
    } else if (ch === '\r' && text[i + 1] === '\n') {
      row.push(cell)
      rows.push(row)
      row = []
      cell = ''
      i++
    } else cell += ch
  }
  return rows
}
