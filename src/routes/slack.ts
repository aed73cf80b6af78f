import type { FastifyInstance } from 'fastify'
import { PLATFORM_FAILURES_MAX, platformFailures } from '../auth/address-failures.ts'
import { checkSlackSignature } from '../chat/slack/signature.ts'
import {
  BadRequest,
  SlackRequestReplayed,
  SlackRequestStale,
  SlackSignatureInvalid,
  SlackSignatureRateLimited,
} from '../errors.ts'
import { CHAT } from '../openapi/routes/chat.ts'

/** A signed request is remembered this long: longer than the five minutes its timestamp is accepted. */
const REPLAY_WINDOW_MS = 10 * 60_000
/** Slack's interaction payloads are far smaller (a modal's state included). */
const MAX_BODY_BYTES = 256 * 1024
/** Requests that fail the signature check from one address in 5 minutes before the next are answered 429. */
export const SIGNATURE_FAILURES_MAX = PLATFORM_FAILURES_MAX

/**
 * `POST <base>slack/interactions`, the Slack app's Request URL (with GATEWAY_SLACK_SIGNING_SECRET). The body
 * is kept raw (this plugin's own parser) and checked before anything reads it: Slack's `v0` signature over
 * the timestamp and the raw bytes, in constant time, the timestamp within five minutes either way, and the
 * signature never seen before (across replicas); then the payload is handled and acknowledged at once, and
 * its follow-up runs after the answer is sent. No credential of a person: the person is the payload's
 * linked Slack user, decided by chat/answers.ts.
 */
export async function slackRoutes(app: FastifyInstance): Promise<void> {
  const slack = app.slack
  const secret = slack?.adapter.signingSecret
  if (slack === null || secret === null || secret === undefined) return
  const { interactions: counted } = slack.metrics
  // Slack posts forms; nothing else is parsed here (a JSON body is 415, not read).
  app.removeAllContentTypeParsers()
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'buffer', bodyLimit: MAX_BODY_BYTES },
    (_request, body, done) => done(null, body),
  )

  const failures = platformFailures(app.stores.slackSignatureFailures, 'Slack signatures', app.log)

  // Slack's few addresses send every team's clicks: the signature (checked first, in constant time), not a
  // per-address budget of requests, guards this. Failed signatures are counted per address (across replicas):
  // past the limit they are answered 429, but every request is still checked, so a valid one from a limited
  // address (Slack's own, shared by every app) is never refused; only the cheap refusals (no, a malformed
  // or a stale signature) skip the HMAC.
  const config = { rateLimit: false, anonymousLimit: false } as const
  app.post('/slack/interactions', { schema: CHAT.interactions, config }, async (request, reply) => {
    const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0)
    const header = (name: string) => {
      const value = request.headers[name]
      return typeof value === 'string' ? value : undefined
    }
    const signature = header('x-slack-signature')
    const refusal = checkSlackSignature({
      secret,
      timestamp: header('x-slack-request-timestamp'),
      signature,
      body,
    })
    if (refusal !== undefined) {
      const wait = await failures.refused(request.ip)
      if (wait > 0) {
        counted.inc({ type: 'unverified', outcome: 'rate_limited' })
        reply.header('retry-after', String(wait))
        throw new SlackSignatureRateLimited(String(wait))
      }
    }
    if (refusal === 'stale') {
      counted.inc({ type: 'unverified', outcome: 'stale' })
      throw new SlackRequestStale()
    }
    if (refusal !== undefined) {
      counted.inc({ type: 'unverified', outcome: 'bad_signature' })
      throw new SlackSignatureInvalid(
        refusal === 'missing'
          ? 'no signature or timestamp'
          : refusal === 'malformed'
            ? 'malformed'
            : 'wrong signature',
      )
    }
    if (!(await slack.seen.first(`slack:${signature}`, REPLAY_WINDOW_MS))) {
      counted.inc({ type: 'unverified', outcome: 'replayed' })
      throw new SlackRequestReplayed()
    }
    let payload: unknown
    try {
      payload = JSON.parse(new URLSearchParams(body.toString('utf8')).get('payload') ?? '')
    } catch {
      counted.inc({ type: 'unverified', outcome: 'malformed' })
      throw new BadRequest('the body has no JSON payload')
    }
    const handled = await slack.adapter.handle(payload, { clientIp: request.ip })
    const after = handled.after
    if (after !== undefined)
      reply.raw.once('close', () => {
        after().catch((err: unknown) => request.log.error({ err }, 'slack: interaction failed'))
      })
    return handled.ack === undefined ? reply.code(200).send() : reply.code(200).send(handled.ack)
  })
}
