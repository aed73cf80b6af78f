import { randomUUID } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import type { Transition } from '../summary/types.ts'

/**
 * The demo's colleague: a person of every demo team who answers about two of every three questions the demo
 * runs ask (20 to 50 s after they open, from the console) and finishes every other handoff (after 30 s),
 * through the gateway as anyone does (signed in with a one-time ticket, its writes checked, audited and
 * forwarded), so the team report has answers, a person, timeouts and handoffs of both kinds from the first
 * minutes. What the colleague leaves times out (90 s) or runs out (the 90 s pause), unless someone trying the
 * demo answers first. Watching the demo sessions' summaries also keeps them read and counted with nobody
 * looking.
 */

const NAME = 'Sam (demo colleague)'
/** One question in this many is left to time out. */
const LEAVE_EVERY = 3
const ANSWER_AFTER_MS = [20_000, 50_000] as const
const FINISH_AFTER_MS = 30_000

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
export function startDemoColleague(app: FastifyInstance, kasmIds: readonly string[]): () => void {
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
  const call = async (method: 'GET' | 'POST', url: string, body?: unknown) => {
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
    await call('POST', `${session}messages`, {
      run: t.run,
      key: randomUUID(),
      reply_to: t.request.requestId,
      revision: request.revision ?? 1,
      values,
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
      const [from, to] = ANSWER_AFTER_MS
      later(from + Math.random() * (to - from), () => answer(kasmId, t))
    } else if (t.type === 'escalation.started' && ++handoffs % 2 === 1) {
      later(FINISH_AFTER_MS, () => finish(kasmId, t.run))
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
