import { randomUUID } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import type { Transition } from '../summary/types.ts'

/**
 * The demo's colleague: a person of every demo team who answers about two of every three questions the demo
 * runs ask (20 to 50 s after they open, from the console) and finishes every other handoff (after 30 s),
 * through the gateway as anyone does (signed in with a one-time ticket, its writes checked, audited and
 * forwarded), so the team report has answers, a person, timeouts and handoffs of both kinds from the first
 * minutes. He says "I'm on it" before he answers, as a team does, and leaves a question someone else has
 * taken: he looks again now and then, and answers it only if they give it back. What the colleague leaves
 * times out (90 s) or runs out (the 90 s pause), unless someone trying the demo answers first. Watching the
 * demo sessions' summaries also keeps them read and counted with nobody looking.
 */

const NAME = 'Sam (demo colleague)'
/** One question in this many is left to time out. */
const LEAVE_EVERY = 3

/** The colleague's timing. */
export interface ColleaguePace {
  /** When he looks at a question after it opens: a time between the two, at random. */
  readonly answerAfterMs: readonly [number, number]
  /** From his "I'm on it" to his answer: long enough to see his mark in the console. */
  readonly typingMs: number
  /** When he looks again at a question someone else holds. */
  readonly recheckMs: number
  /** When he finishes a handoff he takes, after it starts. */
  readonly finishAfterMs: number
}

/** The demo's pace (tests pass a quicker one). */
export const DEMO_PACE: ColleaguePace = {
  answerAfterMs: [20_000, 50_000],
  typingMs: 8000,
  recheckMs: 15_000,
  finishAfterMs: 30_000,
}

type Field = Record<string, unknown>

/** A value the runtime accepts for `field`, or undefined when the colleague leaves it empty (or cannot tell). */
function valueFor(field: Field): unknown {
  const options = Array.isArray(field.enum) ? field.enum : null
  const number = (fallback: number): number => {
    const min = typeof field.minimum === 'number' ? field.minimum : null
    const max = typeof field.maximum === 'number' ? field.maximum : null
    return Math.min(max ?? fallback, Math.max(min ?? 0, fallback))
  }
  switch (field.type) {
    case 'string':
      if (options !== null) return options[Math.floor(Math.random() * options.length)]
      return field.required === true && field.pattern === undefined ? 'ok' : undefined
    case 'integer':
      return number(2)
    case 'number':
      return number(2.5)
    case 'boolean':
      return true
    case 'string[]':
      return options !== null && options.length > 0 ? [options[0]] : undefined
    default:
      return undefined
  }
}

/** Starts the colleague on the demo's sessions; the returned function stops it. */
export function startDemoColleague(
  app: FastifyInstance,
  kasmIds: readonly string[],
  pace: ColleaguePace = DEMO_PACE,
): () => void {
  const base = app.config.basePath
  const timers = new Set<NodeJS.Timeout>()
  let cookie: string | null = null
  let asked = 0
  let handoffs = 0
  let closed = false

  const later = (ms: number, fn: () => Promise<void>): void => {
    const timer = setTimeout(() => {
      timers.delete(timer)
      if (!closed) fn().catch((err: unknown) => app.log.debug({ err }, 'demo colleague: gave up'))
    }, ms)
    timer.unref()
    timers.add(timer)
  }

  const signIn = async (): Promise<string> => {
    const ticket = app.auth.issueLoginTicket({
      sub: 'demo-colleague',
      name: NAME,
      roles: ['operator'],
      teams: ['*'],
    })
    const res = await app.inject({ method: 'GET', url: `${base}auth/login?ticket=${ticket}` })
    const made = res.cookies[0]
    if (made === undefined) throw new Error(`demo colleague not signed in: ${res.statusCode}`)
    return `${made.name}=${made.value}`
  }

  /** A call as the console page makes it, signing in again once should the cookie session have ended. */
  const call = async (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, body?: unknown) => {
    for (let attempt = 0; attempt < 2; attempt++) {
      cookie ??= await signIn()
      const res = await app.inject({
        method,
        url,
        headers: {
          cookie,
          'sec-fetch-site': 'same-origin',
          'x-krg-client': 'console',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      })
      if (res.statusCode !== 401) return res
      cookie = null
    }
    throw new Error('demo colleague: signed out twice')
  }

  const answer = async (
    kasmId: string,
    t: Extract<Transition, { type: 'request.opened' }>,
  ): Promise<void> => {
    const session = `/desktop/${encodeURIComponent(kasmId)}/mcp/`
    const res = await call('GET', `${session}requests/${encodeURIComponent(t.request.requestId)}`)
    const request = res.json() as { state?: string; revision?: number; fields?: Field[] }
    if (res.statusCode !== 200 || request.state !== 'open') return
    const values: Record<string, unknown> = {}
    for (const field of request.fields ?? []) {
      const value = valueFor(field)
      if (value !== undefined && typeof field.id === 'string') values[field.id] = value
      else if (field.required === true) return
    }
    // "I'm on it" first, as the console's button says it: a question someone else holds stays theirs.
    const mark = `${base}api/sessions/${encodeURIComponent(kasmId)}/requests/${encodeURIComponent(t.request.requestId)}/claim?run=${encodeURIComponent(t.run)}`
    const claim = await call('PUT', mark)
    if (claim.statusCode === 409 && (claim.json() as { error?: string }).error === 'question_taken') {
      app.log.debug(
        { kasmId, requestId: t.request.requestId },
        'demo colleague: someone else is on it; looking again later',
      )
      later(pace.recheckMs, () => answer(kasmId, t))
      return
    }
    if (claim.statusCode !== 200) return
    later(pace.typingMs, async () => {
      const sent = await call('POST', `${session}messages`, {
        run: t.run,
        key: randomUUID(),
        reply_to: t.request.requestId,
        revision: request.revision ?? 1,
        values,
      })
      // Refused (it changed or closed meanwhile): the mark goes, so it does not stay his with nobody on it.
      if (sent.statusCode !== 202) await call('DELETE', mark)
    })
  }

  const finish = async (kasmId: string, run: string): Promise<void> => {
    await call('POST', `/desktop/${encodeURIComponent(kasmId)}/mcp/actions`, {
      run,
      key: randomUUID(),
      action: 'finish_handoff',
    })
  }

  const seen = (kasmId: string, t: Transition, replay: boolean): void => {
    if (replay || closed) return
    if (t.type === 'request.opened' && ++asked % LEAVE_EVERY !== 0) {
      const [from, to] = pace.answerAfterMs
      later(from + Math.random() * (to - from), () => answer(kasmId, t))
    } else if (t.type === 'escalation.started' && ++handoffs % 2 === 1) {
      later(pace.finishAfterMs, () => finish(kasmId, t.run))
    }
  }
  const unwatch = kasmIds.map((kasmId) =>
    app.summaries.watch(kasmId, { summary: () => {}, transition: (id, t, replay) => seen(id, t, replay) }),
  )
  return () => {
    closed = true
    for (const timer of timers) clearTimeout(timer)
    timers.clear()
    for (const stop of unwatch) stop()
  }
}
