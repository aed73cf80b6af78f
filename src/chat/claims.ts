import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import type { Operator } from '../auth/operator.ts'
import { DELEGATION_HEADER } from '../identity/delegation.ts'
import type { Claim } from '../overview/claims.ts'
import { type Denial, denialOf, parse } from './answers.ts'

/** The question a chat user takes or gives back. */
export interface ClaimedQuestion {
  readonly kasmId: string
  readonly run: string
  readonly requestId: string
}

/** How taking ("I'm on it") or giving back a question from a chat went, in what the chat tells the person. */
export type ClaimOutcome =
  /** Taken (or held already by the same person), or given back. */
  | { readonly kind: 'done' }
  /** Someone else holds it (null: it was given back since, or cannot be read). */
  | { readonly kind: 'held'; readonly holder: Claim | null }
  /** The question is no longer open. */
  | { readonly kind: 'closed' }
  | { readonly kind: 'denied'; readonly reason: Denial }
  /** The gateway failed; `code` is its error code. */
  | { readonly kind: 'failed'; readonly code: string }

/**
 * "I'm on it" from a chat: the platform-neutral half, as {@link ChatAnswers} is for answers. The claim goes
 * through the console's own route (`PUT|DELETE <base>api/sessions/:kasmId/requests/:requestId/claim`) as the
 * person, by `app.inject` with a one-time delegation, so its rules are the console's and nowhere else: an
 * operator with write access to the session's team, a viewer refused, one holder, a closed question refused,
 * the same rate limit and the same audit record (`via: slack`). Adapters render the outcomes.
 */
export class ChatClaims {
  readonly #app: FastifyInstance
  readonly #log: FastifyBaseLogger

  constructor(app: FastifyInstance, log: FastifyBaseLogger) {
    this.#app = app
    this.#log = log
  }

  /** Takes the question for `operator`. */
  take(operator: Operator, question: ClaimedQuestion, clientIp?: string): Promise<ClaimOutcome> {
    return this.#call('PUT', operator, question, clientIp)
  }

  /** Gives the question back; someone else's claim stays theirs (`held`). */
  giveBack(operator: Operator, question: ClaimedQuestion, clientIp?: string): Promise<ClaimOutcome> {
    return this.#call('DELETE', operator, question, clientIp)
  }

  async #call(
    method: 'PUT' | 'DELETE',
    operator: Operator,
    question: ClaimedQuestion,
    clientIp: string | undefined,
  ): Promise<ClaimOutcome> {
    const { kasmId, run, requestId } = question
    const path = `api/sessions/${encodeURIComponent(kasmId)}/requests/${encodeURIComponent(requestId)}/claim`
    const res = await this.#app.inject({
      method,
      url: `${this.#app.config.basePath}${path}?run=${encodeURIComponent(run)}`,
      headers: { [DELEGATION_HEADER]: this.#app.people.delegate(operator) },
      ...(clientIp === undefined ? {} : { remoteAddress: clientIp }),
    })
    if (res.statusCode === 200 || res.statusCode === 204) return { kind: 'done' }
    const code = parse(res.body)?.error
    if (res.statusCode === 409)
      return code === 'question_closed'
        ? { kind: 'closed' }
        : { kind: 'held', holder: await this.holder(question) }
    const denial = denialOf(res.statusCode)
    if (denial !== null) return { kind: 'denied', reason: denial }
    const failure = typeof code === 'string' ? code : `http_${res.statusCode}`
    this.#log.warn({ kasmId, status: res.statusCode, code: failure }, 'chat claim failed')
    return { kind: 'failed', code: failure }
  }

  /** Who holds the question now, and since when (null: nobody, or the marks cannot be read). */
  async holder(question: ClaimedQuestion): Promise<Claim | null> {
    try {
      const claims = await this.#app.overview.claims.of(question.kasmId, question.run)
      return claims.get(question.requestId) ?? null
    } catch (err) {
      this.#log.warn({ err }, 'question marks cannot be read: the holder is unknown')
      return null
    }
  }
}

/** The `outcome` label of a claim that was not done, in the adapters' interaction metrics. */
export function claimLabel(outcome: Exclude<ClaimOutcome, { kind: 'done' }>): string {
  return outcome.kind === 'denied' ? outcome.reason : outcome.kind
}
