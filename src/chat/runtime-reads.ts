import type { FastifyBaseLogger } from 'fastify'
import { type Dispatcher, request } from 'undici'
import { checkFieldDefs, type FieldDef, isFieldType } from '../protocol/fields.ts'
import type { Session } from '../sessions/types.ts'
import { TOKEN_HEADER } from '../upstream/agent.ts'
import { isSafeParam, upstreamUrl } from '../upstream/paths.ts'
import { tokenEcho } from '../upstream/token-echo.ts'
import type { PostedQuestion } from './messages.ts'

/** A request (a run's question) as the runtime describes it, checked. */
export interface RuntimeQuestion extends PostedQuestion {
  readonly run: string
  readonly requestId: string
  readonly state: string
  /** How it closed, when it did (`reply`, `timeout`, `cancelled`, `run_ended`). */
  readonly closedBy?: string
  /** The reply that closed it. */
  readonly replyId?: string
  /** False when the fields do not pass the protocol's checks: nothing is shown as a form then. */
  readonly fieldsValid: boolean
}

/** What {@link RuntimeReads} works with. */
export interface RuntimeReadsOptions {
  readonly dispatcherFor: (session: Session) => Dispatcher
  /** A runtime echoing its token is counted like on the proxied routes (`krg_upstream_token_echoes_total`). */
  readonly onTokenEcho: (session: Session) => void
  readonly timeoutMs: number
  readonly log: FastifyBaseLogger
}

/** An answer of at most this much is read; a request's definition is far smaller. */
const MAX_BYTES = 256 * 1024
const MAX_TITLE = 500
const MAX_HELP = 4000

/**
 * The gateway's own reads of a session's runtime for the chat adapters: a question's definition (to post
 * it, build its form and check an answer) and the reply that closed it (to say what was answered). The
 * messaging token goes in the header as on every upstream request, through the session's dispatcher (the URL
 * policy guards admin-registered upstreams), and an echoed token is masked before anything is parsed. The
 * runtime is hostile: ids are checked before they go into a path, answers are bounded, shapes checked.
 */
export class RuntimeReads {
  readonly #o: RuntimeReadsOptions

  constructor(options: RuntimeReadsOptions) {
    this.#o = options
  }

  /** The question `requestId` of the session's current run, or null (unknown, unreachable, malformed). */
  async question(session: Session, requestId: string): Promise<RuntimeQuestion | null> {
    if (!isSafeParam(requestId)) return null
    const body = await this.#get(session, `requests/${requestId}`)
    if (!isRecord(body) || typeof body.run !== 'string' || body.request_id !== requestId) return null
    const fields = Array.isArray(body.fields) ? body.fields : []
    // Version 1 is additive: a type this gateway does not know is a newer one, not an error (it is shown as
    // needing the console, never guessed at).
    const newer = new Set(
      fields
        .map((f) => (f as { type?: unknown })?.type)
        .filter((t): t is string => typeof t === 'string' && !isFieldType(t)),
    )
    const fieldsValid = fields.length > 0 && checkFieldDefs(fields, newer).length === 0
    const help = typeof body.help === 'string' ? body.help.slice(0, MAX_HELP) : undefined
    return {
      run: body.run,
      requestId,
      title: typeof body.title === 'string' ? body.title.slice(0, MAX_TITLE) : requestId,
      ...(help === undefined ? {} : { help }),
      fields: fieldsValid ? (fields as FieldDef[]) : [],
      revision: Number.isSafeInteger(body.revision) ? (body.revision as number) : 1,
      deadline: typeof body.deadline === 'string' ? body.deadline : null,
      state: typeof body.state === 'string' ? body.state : 'open',
      ...(typeof body.closed_by === 'string' ? { closedBy: body.closed_by } : {}),
      ...(typeof body.reply_id === 'string' ? { replyId: body.reply_id } : {}),
      fieldsValid,
    }
  }

  /** The values of the reply `messageId`, or null. */
  async replyValues(session: Session, messageId: string): Promise<Record<string, unknown> | null> {
    if (!isSafeParam(messageId)) return null
    const body = await this.#get(session, `messages/${messageId}`)
    return isRecord(body) && isRecord(body.values) ? body.values : null
  }

  async #get(session: Session, path: string): Promise<unknown> {
    const signal = AbortSignal.timeout(this.#o.timeoutMs)
    try {
      const res = await request(upstreamUrl(session.upstream, path, ''), {
        dispatcher: this.#o.dispatcherFor(session),
        method: 'GET',
        headers: { accept: 'application/json', [TOKEN_HEADER]: session.messagingToken.reveal() },
        signal,
      })
      if (res.statusCode !== 200) {
        await res.body.dump().catch(() => {})
        this.#o.log.debug({ kasmId: session.kasmId, path, status: res.statusCode }, 'runtime read refused')
        return null
      }
      const chunks: Buffer[] = []
      let size = 0
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        size += chunk.length
        if (size > MAX_BYTES) {
          res.body.destroy()
          return null
        }
        chunks.push(chunk)
      }
      const masked = tokenEcho(session.messagingToken).maskBody(Buffer.concat(chunks), () =>
        this.#o.onTokenEcho(session),
      )
      return JSON.parse(masked.toString('utf8'))
    } catch (err) {
      this.#o.log.warn({ kasmId: session.kasmId, path, err }, 'runtime read failed')
      return null
    }
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
