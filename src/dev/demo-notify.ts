import { randomBytes, timingSafeEqual } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../config.ts'
import { signature } from '../notify/sign.ts'
import { Secret } from '../sessions/secret.ts'

/**
 * The demo's attention routing, so a newcomer sees escalation happen: a notify file of two steps per demo
 * team, both webhooks to a receiver in this process that logs each notification as a line a person reads.
 * Step 0 (`team`) is told when a question opens; step 1 (`on-call`) when it is still open and nobody holds
 * it {@link ON_CALL_AFTER_S} seconds later (tests pass a shorter time). The demo's questions wait 90 s and its colleague answers after
 * 20 to 50 s, so within a minute or two some are answered before the step, some after it, and some time out
 * after it.
 */

/** When the demo's second step goes out: well before the demo questions' 90 s deadline. */
export const ON_CALL_AFTER_S = 30

/** The largest body the receiver reads (a notification is a few hundred bytes). */
const MAX_BODY = 64 * 1024

/** The demo's notifications: the config to build the app with, and the receiver to tell where to log. */
export interface DemoNotify {
  /** `config` with GATEWAY_NOTIFY_FILE (and the receiver's address allowed by the URL policy). */
  readonly config: Config
  /** The receiver's origin (`http://127.0.0.1:<port>`). */
  readonly url: string
  /** Where the receiver writes its lines (the app's logger, once there is one). */
  logTo(log: FastifyBaseLogger): void
  close(): Promise<void>
}

/** A notification's body as the receiver reads it (the gateway's JSON format; anything else is ignored). */
interface Body {
  type?: unknown
  kasmId?: unknown
  team?: unknown
  step?: unknown
  reminder?: unknown
  request?: { title?: unknown; closed_by?: unknown }
  claim?: { name?: unknown }
  unclaimed?: { reason?: unknown }
}

const str = (v: unknown, fallback = ''): string => (typeof v === 'string' ? v.slice(0, 200) : fallback)

/** What a notification says, as a person at the demo's terminal reads it. */
export function demoLine(target: string, b: Body, onCallAfterS = ON_CALL_AFTER_S): string {
  const title = `“${str(b.request?.title)}”`
  const where = `in ${str(b.kasmId, 'a session')}`
  const who = target === 'on-call' ? `demo on-call (step 1, after ${onCallAfterS} s)` : 'demo team'
  switch (b.type) {
    case 'request.opened':
      if (b.reminder === true) return `${who}: reminder, still open ${where}: ${title}`
      return target === 'on-call'
        ? `${who}: ESCALATED, nobody has taken the question ${where} yet: ${title}`
        : `${who}: a question is waiting ${where}: ${title}`
    case 'request.claimed':
      return `${who}: ${str(b.claim?.name, 'someone')} is on it ${where}: ${title}`
    case 'request.unclaimed':
      return `${who}: the claim ${b.unclaimed?.reason === 'lapsed' ? 'lapsed' : 'was given back'} ${where}: ${title}`
    case 'request.closed':
      return `${who}: closed (${str(b.request?.closed_by, 'closed')}) ${where}: ${title}`
    case 'escalation.started':
      return `${who}: a run handed over to a person ${where}`
    case 'escalation.ended':
      return `${who}: the handoff ended ${where}`
    default:
      return `${who}: ${str(b.type, 'a notification')} ${where}`
  }
}

/**
 * Starts the demo's receiver and writes its notify file, unless the person set up notifications of their
 * own (GATEWAY_NOTIFY_URL or GATEWAY_NOTIFY_FILE): then null, and the demo notifies what they chose.
 */
export async function startDemoNotify(
  config: Config,
  options: { onCallAfterS?: number } = {},
): Promise<DemoNotify | null> {
  const onCallAfterS = options.onCallAfterS ?? ON_CALL_AFTER_S
  const { env } = config
  if (env.GATEWAY_NOTIFY_FILE !== undefined || env.GATEWAY_NOTIFY_URL.length > 0) return null
  // Signed as any webhook is; the receiver checks it as docs/notifications.md tells a receiver to.
  const secret = randomBytes(24).toString('base64url')
  const key = new Secret(secret)
  let log: FastifyBaseLogger | null = null
  const server = http.createServer((req, res) => {
    const target = req.url === '/on-call' ? 'on-call' : req.url === '/team' ? 'team' : null
    if (req.method !== 'POST' || target === null) {
      res.writeHead(404).end()
      return
    }
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (c: Buffer) => {
      size += c.length
      if (size <= MAX_BODY) chunks.push(c)
    })
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8')
      const given = req.headers['x-krg-signature']
      const at = req.headers['x-krg-timestamp']
      const want = typeof at === 'string' ? signature(key, at, raw) : ''
      const signed =
        typeof given === 'string' &&
        given.length === want.length &&
        timingSafeEqual(Buffer.from(given), Buffer.from(want))
      if (size > MAX_BODY || !signed) {
        res.writeHead(size > MAX_BODY ? 413 : 401).end()
        return
      }
      res.writeHead(204).end()
      let body: Body
      try {
        body = JSON.parse(raw) as Body
      } catch {
        return
      }
      log?.info(
        {
          webhook: target,
          type: str(body.type),
          team: str(body.team),
          ...(typeof body.step === 'number' ? { step: body.step } : {}),
        },
        demoLine(target, body, onCallAfterS),
      )
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve())
  })
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const dir = await mkdtemp(join(tmpdir(), 'krg-demo-notify-'))
  const file = join(dir, 'notify.yaml')
  const steps = [
    { url: `${url}/team`, secret },
    { url: `${url}/on-call`, secret, after_s: onCallAfterS },
  ]
  // JSON is YAML: one file the loader reads either way. Mode 0600: it holds the secret.
  await writeFile(file, JSON.stringify({ teams: { blue: steps, red: steps } }, null, 2), { mode: 0o600 })
  const allow = env.GATEWAY_UPSTREAM_ALLOW
  return {
    url,
    config: {
      ...config,
      env: {
        ...env,
        GATEWAY_NOTIFY_FILE: file,
        // The receiver is on loopback, which the URL policy refuses unless a listed range holds it. Listing a
        // range makes the list apply: runtimes live on private networks, so those stay allowed with it.
        GATEWAY_UPSTREAM_ALLOW: [
          ...(allow.length > 0 ? allow : ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7']),
          '127.0.0.1/32',
        ],
      },
    },
    logTo(l) {
      log = l.child({ component: 'demo-webhook' })
    },
    async close() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await rm(dir, { recursive: true, force: true })
    },
  }
}
