import { createHash } from 'node:crypto'
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import { type Answerer, whoAnswered } from '../audit/answers.ts'
import { allows, type Operator, seesTeam } from '../auth/operator.ts'
import type { ChatAccount } from '../identity/chat-link-store.ts'
import { DELEGATION_HEADER } from '../identity/delegation.ts'
import type { People } from '../identity/people.ts'
import { checkReply, type FieldDef, type FieldIssue } from '../protocol/fields.ts'

/** Why a chat user may not answer. */
export type Denial =
  /** No linked account: they are offered the link. */
  | 'unlinked'
  /** The identity provider refused to renew the link's sign-in: they must link again. */
  | 'suspended'
  /** Their role is viewer in the session's team: they may only watch. */
  | 'viewer'
  /** The session is not of one of their teams (or no longer exists). */
  | 'team'
  /** Too many requests of this person (the gateway's rate limit). */
  | 'rate_limited'
  /** The link store cannot be read now. */
  | 'unavailable'

/** Who may answer: a linked person allowed to write to the session. */
export type Authorisation =
  | { readonly ok: true; readonly operator: Operator; readonly team: string }
  | { readonly ok: false; readonly reason: Denial; readonly team?: string }

/** How an answer went, in what a chat tells the person. */
export type AnswerOutcome =
  /** The runtime took it (`replayed`: the same answer was taken before, e.g. a double click). */
  | { readonly kind: 'accepted'; readonly replayed: boolean }
  /** The fields did not accept it (the gateway's check, or the runtime's 422): nothing was stored. */
  | { readonly kind: 'invalid'; readonly fields: readonly FieldIssue[] }
  /** Someone answered first (null: the gateway does not know who). */
  | { readonly kind: 'taken'; readonly by: Answerer | null }
  /** It is no longer open: it timed out, was cancelled or the run ended (null: unknown how). */
  | { readonly kind: 'closed'; readonly closedBy: string | null }
  /** The run moved on (a new run, a new revision): the question answered is not the one asked now. */
  | { readonly kind: 'moved_on' }
  | { readonly kind: 'denied'; readonly reason: Denial }
  /** The gateway or the runtime failed; `code` is the gateway's error code. */
  | { readonly kind: 'failed'; readonly code: string }

/** One answer from a chat. */
export interface ChatAnswer {
  /** The chat account it came from: the idempotency key is derived from it and the question. */
  readonly account: ChatAccount
  readonly kasmId: string
  readonly run: string
  readonly requestId: string
  readonly revision: number
  /** The question's fields, as posted: the values are checked against them before anything is sent. */
  readonly fields: readonly FieldDef[]
  readonly values: Record<string, unknown>
  /** Where the interaction came from (the platform's address), for the audit record. */
  readonly clientIp?: string
}

/** How long {@link ChatAnswers.whoAnswered} waits for the audit record of an answer just given. */
const ANSWERER_WAIT_MS = 3000

/**
 * The platform-neutral half of answering from a chat: who the chat user is (their linked account, through
 * src/identity), whether they may answer (operator of the session's team, as everywhere), and the answer
 * itself, checked against the question's fields (src/protocol/fields.ts) and then sent through the very
 * route the console uses, `POST /desktop/<kasm_id>/mcp/messages`, as the person (a one-time in-process
 * delegation): the same authorisation, rate limit, token injection and audit record (with `via`). The
 * idempotency key is derived from the chat account and the question, so a retried payload or a double click
 * is one reply. Adapters render the outcomes.
 */
export class ChatAnswers {
  readonly #app: FastifyInstance
  readonly #people: People
  readonly #log: FastifyBaseLogger

  constructor(app: FastifyInstance, people: People, log: FastifyBaseLogger) {
    this.#app = app
    this.#people = people
    this.#log = log
  }

  /**
   * The operator a chat user acts as for the session, or why not. `waitMs` bounds the wait for a due refresh
   * of the link (see ChatLinks.check).
   */
  async authorise(account: ChatAccount, kasmId: string, waitMs?: number): Promise<Authorisation> {
    const links = this.#people.links
    if (links === null) return { ok: false, reason: 'unlinked' }
    let check: Awaited<ReturnType<typeof links.check>>
    let team: string | undefined
    try {
      check = await links.check(account, waitMs)
      team = (await this.#app.sessions.get(kasmId))?.team
    } catch (err) {
      this.#log.warn({ err }, 'chat links or sessions cannot be read')
      return { ok: false, reason: 'unavailable' }
    }
    if (!check.ok) return { ok: false, reason: check.reason }
    const operator = this.#people.fromChatLink(check.record)
    // A session of another team looks like an unknown one, as everywhere.
    if (team === undefined || !seesTeam(operator, team)) return { ok: false, reason: 'team' }
    if (!allows(operator, 'write')) return { ok: false, reason: 'viewer', team }
    return { ok: true, operator, team }
  }

  /** Checks the answer with the protocol's rules, then sends it as `operator` (see the class). */
  async answer(operator: Operator, answer: ChatAnswer): Promise<AnswerOutcome> {
    // Attachments cannot be given in a chat: a field asking for one never reaches a form.
    const issues = checkReply(answer.fields, answer.values, () => null)
    if (issues.length > 0) return { kind: 'invalid', fields: issues }
    const res = await this.#app.inject({
      method: 'POST',
      url: `/desktop/${encodeURIComponent(answer.kasmId)}/mcp/messages`,
      headers: {
        'content-type': 'application/json',
        [DELEGATION_HEADER]: this.#people.delegate(operator),
      },
      payload: JSON.stringify({
        run: answer.run,
        key: answerKey(answer),
        reply_to: answer.requestId,
        revision: answer.revision,
        values: answer.values,
      }),
      ...(answer.clientIp === undefined ? {} : { remoteAddress: answer.clientIp }),
    })
    const body = parse(res.body)
    switch (res.statusCode) {
      case 200:
      case 202:
        return { kind: 'accepted', replayed: res.statusCode === 200 }
      case 422:
        return { kind: 'invalid', fields: issuesOf(body) }
      case 409:
        return this.#conflict(answer, body)
      default: {
        const denial = denialOf(res.statusCode)
        if (denial !== null) return { kind: 'denied', reason: denial }
        const code = typeof body?.error === 'string' ? body.error : `http_${res.statusCode}`
        this.#log.warn({ kasmId: answer.kasmId, status: res.statusCode, code }, 'chat answer failed')
        return { kind: 'failed', code }
      }
    }
  }

  /**
   * Who answered the question through the gateway, waiting up to three seconds for the record: the audit
   * record of an answer is written when its request ends, which may be after the runtime's event of the
   * closing reached the gateway (and, in a cluster, a replica batches its records for up to 100 ms).
   */
  async whoAnswered(
    question: { kasmId: string; run: string; requestId: string },
    waitMs = ANSWERER_WAIT_MS,
  ): Promise<Answerer | null> {
    const until = Date.now() + waitMs
    for (let pause = 50; ; pause = Math.min(pause * 2, 500)) {
      try {
        const found = await whoAnswered(this.#app.audit, question)
        if (found !== null || Date.now() + pause > until) return found
      } catch (err) {
        this.#log.warn({ err }, 'audit log cannot be read: who answered is unknown')
        return null
      }
      await new Promise((resolve) => setTimeout(resolve, pause))
    }
  }

  /** A 409: someone answered first, the question closed otherwise, or the run moved on. */
  async #conflict(answer: ChatAnswer, body: Record<string, unknown> | null): Promise<AnswerOutcome> {
    const code = body?.error
    // The runtime's 409 for another run carries the current run and epoch (sidebar protocol, messages).
    if (code === 'stale_revision' || (typeof body?.run === 'string' && body.run !== answer.run))
      return { kind: 'moved_on' }
    const closedBy = typeof body?.closed_by === 'string' ? body.closed_by : null
    if (closedBy !== null && closedBy !== 'reply') return { kind: 'closed', closedBy }
    const by = await this.whoAnswered(answer)
    if (by !== null || closedBy === 'reply' || code === 'key_conflict') return { kind: 'taken', by }
    return { kind: 'closed', closedBy: null }
  }
}

/** The idempotency key of an answer: the same for every payload of one chat user about one question. */
export function answerKey(answer: Pick<ChatAnswer, 'account' | 'kasmId' | 'run' | 'requestId'>): string {
  const { chat, workspace, user } = answer.account
  const digest = createHash('sha256')
    .update([chat, workspace, user, answer.kasmId, answer.run, answer.requestId].join('\u0000'))
    .digest('base64url')
  return `${chat}-${digest.slice(0, 32)}`
}

/**
 * Why a write made as a chat's person (an answer, a claim) was refused by the gateway's own checks: 403 their
 * role, 404 a session not of their teams, 429 their rate limit; null for any other status.
 */
export function denialOf(status: number): Denial | null {
  if (status === 403) return 'viewer'
  if (status === 404) return 'team'
  if (status === 429) return 'rate_limited'
  return null
}

/** A JSON object body (a gateway's or a runtime's answer), or null. */
export function parse(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null
  } catch {
    return null
  }
}

/** The `fields` of a 422 body (the runtime's, so hostile): well-formed entries only, at most 50. */
function issuesOf(body: Record<string, unknown> | null): FieldIssue[] {
  const list = Array.isArray(body?.fields) ? body.fields : []
  const out: FieldIssue[] = []
  for (const item of list.slice(0, 50)) {
    const { field, error } = (item ?? {}) as Record<string, unknown>
    if (typeof field === 'string' && typeof error === 'string')
      out.push({ field: field.slice(0, 64), error: error.slice(0, 200) })
  }
  if (out.length === 0) out.push({ field: '', error: 'the run did not accept this answer' })
  return out
}
