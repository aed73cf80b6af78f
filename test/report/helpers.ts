import assert from 'node:assert/strict'
import { request } from 'undici'
import type { SimulatedRuntime } from '../../src/dev/runtime/index.ts'
import type { QuestionRecord } from '../../src/report/types.ts'
import { waitFor } from '../helpers/wait.ts'

/** The session token of the runtimes these tests start (cancel is the session token's only). */
export const SESSION_TOKEN = 'session-token-for-report-tests'

/** One person, as the report's tests have them write: a bearer, and a cookie session made from it. */
export interface Writer {
  readonly bearer: string
  /** `cookie` and `sec-fetch-site`, as a page of the gateway's origin sends them. */
  readonly browser: Record<string, string>
}

/** Signs `bearer` in at the gateway (POST auth/session) for a cookie, as a browser would hold it. */
export async function writer(gatewayUrl: string, bearer: string): Promise<Writer> {
  const res = await request(`${gatewayUrl}/auth/session`, {
    method: 'POST',
    headers: { authorization: `Bearer ${bearer}` },
  })
  await res.body.dump()
  assert.equal(res.statusCode, 201)
  const cookie = String(res.headers['set-cookie']).split(';')[0] as string
  return { bearer, browser: { cookie, 'sec-fetch-site': 'same-origin' } }
}

/** A write to session `kasmId` through the gateway; fails the test unless the runtime accepted it. */
export async function write(
  gatewayUrl: string,
  kasmId: string,
  path: string,
  headers: Record<string, string>,
  body: unknown,
): Promise<void> {
  const res = await request(`${gatewayUrl}/desktop/${kasmId}/mcp/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  })
  const text = await res.body.text()
  assert.ok(res.statusCode === 202 || res.statusCode === 200, `${path}: ${res.statusCode} ${text}`)
}

const FIELDS = [{ id: 'choice', type: 'string', enum: ['a', 'b'], required: true }]

/**
 * The scripted sequence on `runtime` (session `kasmId`), every person's write through the gateway at
 * `url` (a function: a cluster test spreads them over its replicas). Run 1: a question answered in time (a
 * bearer: `api`), one answered late (the console page), one timed out, one cancelled by the orchestrator, a
 * handoff a person ends ("I'm done, finish" from the bundled sidebar), one still open when the run ends. Run 2:
 * a handoff that runs out. Returns what the report must then say.
 */
export async function playSequence(
  runtime: SimulatedRuntime,
  kasmId: string,
  url: () => string,
  person: Writer,
): Promise<{ runs: [string, string]; timedOut: string }> {
  const run1 = runtime.run
  const reply = (headers: Record<string, string>, q: { request_id: string; revision: number }, key: string) =>
    write(url(), kasmId, 'messages', headers, {
      run: run1,
      key,
      reply_to: q.request_id,
      revision: q.revision,
      values: { choice: 'a' },
    })

  const inTime = runtime.ask({ title: 'Which of the two records?', fields: FIELDS, deadlineS: 120 })
  await reply({ authorization: `Bearer ${person.bearer}` }, inTime, 'in-time')

  // The agent keeps waiting past the deadline it announced: the answer comes late.
  const late = runtime.ask({ title: 'Accept the dialog?', fields: FIELDS, deadlineS: 0.3, waitS: 120 })
  const deadline = Date.now() + 300
  await waitFor('the late question past its deadline', () => Date.now() > deadline + 50)
  await reply({ ...person.browser, 'x-krg-client': 'console' }, late, 'late')

  const timedOut = runtime.ask({ title: '=HYPERLINK("http://evil.example")', fields: FIELDS, deadlineS: 0.3 })
  await waitFor('the third question timed out', async () => {
    const res = await request(`${runtime.url}requests/${timedOut.request_id}`)
    return ((await res.body.json()) as { state: string }).state === 'closed'
  })

  const cancelled = runtime.ask({ title: 'Cancelled question', fields: FIELDS })
  const cancel = await request(`${runtime.url}requests/${cancelled.request_id}/cancel`, {
    method: 'POST',
    headers: { 'x-kasm-runtime-session-token': SESSION_TOKEN },
  })
  await cancel.body.dump()
  assert.equal(cancel.statusCode, 200)

  runtime.escalate('a login only a person may do', 600)
  await write(url(), kasmId, 'actions', person.browser, {
    run: run1,
    key: 'finish',
    action: 'finish_handoff',
  })

  runtime.ask({ title: 'Still open when the run ends', fields: FIELDS })
  runtime.closeTrace({ done: true })

  const run2 = runtime.newRun()
  runtime.escalate('nobody came', 0.3)
  return { runs: [run1, run2], timedOut: timedOut.request_id }
}

/** What the report's metrics say, summed over the scrapes of every replica given. */
export interface ReportCounts {
  opened: number
  closed: Record<string, number>
  answers: Record<string, number>
  /** Answers with no time left (the `le="0"` bucket of the deadline histogram), and all of them. */
  noTimeLeft: number
  deadlineLeftCount: number
  handoffs: Record<string, number>
  handoffWaits: number
}

/** Scrapes `/metrics` of each URL and sums the report's series of `team`. */
export async function reportCounts(urls: readonly string[], team: string): Promise<ReportCounts> {
  const out: ReportCounts = {
    opened: 0,
    closed: {},
    answers: {},
    noTimeLeft: 0,
    deadlineLeftCount: 0,
    handoffs: {},
    handoffWaits: 0,
  }
  const add = (into: Record<string, number>, key: string | undefined, value: number) => {
    if (key !== undefined) into[key] = (into[key] ?? 0) + value
  }
  for (const url of urls) {
    const res = await request(`${url}/metrics`)
    for (const line of (await res.body.text()).split('\n')) {
      const m = /^(krg_\w+)\{([^}]*)\} (\S+)$/.exec(line)
      if (m === null) continue
      const labels = Object.fromEntries(
        [...(m[2] as string).matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]),
      )
      if (labels.team !== team) continue
      const value = Number(m[3])
      switch (m[1]) {
        case 'krg_questions_opened_total':
          out.opened += value
          break
        case 'krg_questions_closed_total':
          add(out.closed, labels.closed_by, value)
          break
        case 'krg_question_answer_seconds_count':
          add(out.answers, labels.via, value)
          break
        case 'krg_question_deadline_left_seconds_bucket':
          if (labels.le === '0') out.noTimeLeft += value
          break
        case 'krg_question_deadline_left_seconds_count':
          out.deadlineLeftCount += value
          break
        case 'krg_handoffs_total':
          add(out.handoffs, labels.ended_by, value)
          break
        case 'krg_handoff_wait_seconds_count':
          out.handoffWaits += value
          break
      }
    }
  }
  return out
}

/** The counts of the scripted sequence ({@link playSequence}), once each. */
export const SEQUENCE_COUNTS: ReportCounts = {
  opened: 5,
  closed: { reply: 2, timeout: 1, cancel: 1, run_end: 1, other: 0 },
  answers: { api: 1, console: 1, sidebar: 0, slack: 0, msteams: 0, unknown: 0 },
  noTimeLeft: 1,
  deadlineLeftCount: 2,
  handoffs: { operator: 1, timeout: 1, run_end: 0 },
  handoffWaits: 2,
}

/**
 * A closed question's record as the store holds it, `now`-relative: opened 10 min ago, answered by Dan from
 * the console a minute later, its deadline 5 min ago; `extra` changes any of it.
 */
export function questionRecord(
  id: string,
  team: string,
  now: number,
  extra: Partial<QuestionRecord> = {},
): QuestionRecord {
  const iso = (agoS: number) => new Date(now - agoS * 1000).toISOString()
  return {
    kind: 'question',
    id: JSON.stringify(['question', 'k1', 'run-1', id]),
    team,
    kasmId: team === 'blue' ? 'k1' : 'k2',
    run: 'run-1',
    requestId: id,
    title: `Question ${id}`,
    openedAt: iso(600),
    closedAt: iso(540),
    deadline: iso(300),
    closedBy: 'reply',
    sub: 'dan',
    name: 'Dan',
    via: 'console',
    ...extra,
  }
}
