import type { Operator } from '../auth/operator.ts'
import { seesTeam } from '../auth/operator.ts'
import { BadRequest, SessionConflict, SessionNotFound } from '../errors.ts'
import type { FileSession } from './file.ts'
import { Secret } from './secret.ts'
import type { SessionStore } from './store.ts'
import {
  KASM_ID,
  type Session,
  type SessionInput,
  type SessionRegistry,
  type SessionView,
  type UnreadableSession,
} from './types.ts'
import { formatIssues, normaliseUpstream, registrationSchema, upstreamFromTemplate } from './validate.ts'

/** What a sessions-file load changed, by kasmId (for the log line). */
export interface FileApplyResult {
  added: string[]
  changed: string[]
  removed: string[]
  /** File entries ignored because an admin-registered session holds that kasmId. */
  shadowed: string[]
}

/** The public view of a session: never its token. */
export function toView(session: Session): SessionView {
  const { kasmId, upstream, team, source, version, kasmUserId } = session
  return { kasmId, upstream, team, source, version, ...(kasmUserId === undefined ? {} : { kasmUserId }) }
}

/**
 * The session registry over a {@link SessionStore}. Writes on this replica run one at a time, so a version
 * is computed from the session it replaces and a reload is never interleaved with an admin write.
 *
 * Sources do not fight: the admin API cannot change or remove a session from the sessions file (edit the
 * file and reload), and a reload never touches admin or demo sessions.
 */
export class StoreSessionRegistry implements SessionRegistry {
  readonly #store: SessionStore
  readonly #template: string | undefined
  #writes: Promise<unknown> = Promise.resolve()

  constructor(store: SessionStore, options: { template?: string } = {}) {
    this.#store = store
    this.#template = options.template
  }

  async resolve(kasmId: string, operator: Operator): Promise<Session> {
    // A foreign session answers exactly like an unknown one: same error, same message.
    const session = await this.get(kasmId)
    if (session === undefined || !seesTeam(operator, session.team)) throw new SessionNotFound()
    return session
  }

  resolveHeld(kasmId: string, operator: Operator): Session | undefined {
    const session = this.#store.peek(kasmId)
    return session !== undefined && seesTeam(operator, session.team) ? session : undefined
  }

  async get(kasmId: string): Promise<Session | undefined> {
    if (!KASM_ID.test(kasmId)) return undefined
    return this.#store.get(kasmId)
  }

  async list(): Promise<SessionView[]> {
    const sessions = await this.#store.list()
    return sessions.map(toView).sort((a, b) => (a.kasmId < b.kasmId ? -1 : a.kasmId > b.kasmId ? 1 : 0))
  }

  /**
   * Registers or replaces a session. Throws BadRequest for invalid input or when there is no upstream and no
   * template, SessionConflict when a sessions-file session would be replaced by another source.
   */
  put(input: SessionInput): Promise<SessionView> {
    const parsed = registrationSchema.safeParse(input)
    if (!parsed.success) return Promise.reject(new BadRequest(formatIssues(parsed.error)))
    const { kasmId, team, source, kasmUserId } = parsed.data
    let upstream = parsed.data.upstream
    if (upstream === undefined) {
      const built = upstreamFromTemplate(this.#template, kasmId)
      if (built === undefined)
        return Promise.reject(new BadRequest('upstream: is required (GATEWAY_UPSTREAM_TEMPLATE is not set)'))
      if (!built.ok)
        return Promise.reject(new BadRequest(`upstream from GATEWAY_UPSTREAM_TEMPLATE ${built.reason}`))
      upstream = built.url
    }
    const messagingToken = new Secret(parsed.data.messagingToken)
    return this.#serialised(async () => {
      const existing = await this.#store.get(kasmId)
      if (existing?.source === 'file' && source !== 'file')
        throw new SessionConflict(
          `session ${kasmId} comes from GATEWAY_SESSIONS_FILE: change it there and reload (SIGHUP)`,
        )
      // Its token is in the session's environment, which only a new launch can change.
      if (existing?.source === 'launch' && source !== 'launch')
        throw new SessionConflict(
          `session ${kasmId} was launched through the gateway with a token in its environment: launch a new one (POST /admin/sessions) to change it`,
        )
      const session = next(existing, {
        kasmId,
        upstream,
        team,
        messagingToken,
        source,
        ...(kasmUserId === undefined ? {} : { kasmUserId }),
      })
      await this.#store.put(session)
      return toView(session)
    })
  }

  relocate(kasmId: string, upstream: string, version: number): Promise<SessionView> {
    const checked = normaliseUpstream(upstream)
    if (!checked.ok) return Promise.reject(new BadRequest(`upstream: ${checked.reason}`))
    return this.#serialised(async () => {
      const existing = await this.#store.get(kasmId)
      if (existing === undefined || existing.version !== version)
        throw new SessionConflict(`session ${kasmId} changed meanwhile`)
      if (existing.upstream === checked.url) return toView(existing)
      const session = next(existing, { ...existing, upstream: checked.url })
      await this.#store.put(session)
      return toView(session)
    })
  }

  /** Removes a session; false when unknown. Throws SessionConflict for a sessions-file session. */
  remove(kasmId: string, options: { version?: number } = {}): Promise<boolean> {
    if (!KASM_ID.test(kasmId)) return Promise.resolve(false)
    return this.#serialised(async () => {
      const existing = await this.#store.get(kasmId)
      if (existing === undefined) return false
      if (options.version !== undefined && existing.version !== options.version) return false
      if (existing.source === 'file')
        throw new SessionConflict(
          `session ${kasmId} comes from GATEWAY_SESSIONS_FILE: remove it there and reload (SIGHUP)`,
        )
      return this.#store.remove(kasmId)
    })
  }

  unreadable(): Promise<UnreadableSession[]> {
    return this.#store.unreadable()
  }

  checkWritable(): void {
    this.#store.assertWritable()
  }

  dropUnreadable(kasmId: string): Promise<boolean> {
    if (!KASM_ID.test(kasmId)) return Promise.resolve(false)
    return this.#serialised(() => this.#store.dropUnreadable(kasmId))
  }

  onChange(listener: (kasmId: string) => void): () => void {
    return this.#store.subscribe(listener)
  }

  /**
   * Makes the file sessions exactly `entries`: adds new ones, replaces changed ones (version bumped when the
   * token or upstream changed), removes those no longer listed. Admin and demo sessions are left alone; a
   * file entry whose kasmId one of them holds is reported as shadowed and not applied.
   */
  applyFile(entries: readonly FileSession[]): Promise<FileApplyResult> {
    return this.#serialised(async () => {
      const result: FileApplyResult = { added: [], changed: [], removed: [], shadowed: [] }
      const listed = new Set(entries.map((e) => e.kasmId))
      for (const entry of entries) {
        const existing = await this.#store.get(entry.kasmId)
        if (existing !== undefined && existing.source !== 'file') {
          result.shadowed.push(entry.kasmId)
          continue
        }
        if (existing !== undefined && same(existing, entry)) continue
        await this.#store.put(next(existing, { ...entry, source: 'file' }))
        ;(existing === undefined ? result.added : result.changed).push(entry.kasmId)
      }
      for (const session of await this.#store.list()) {
        if (session.source !== 'file' || listed.has(session.kasmId)) continue
        if (await this.#store.remove(session.kasmId)) result.removed.push(session.kasmId)
      }
      return result
    })
  }

  #serialised<T>(write: () => Promise<T>): Promise<T> {
    const run = this.#writes.then(write, write)
    this.#writes = run.catch(() => {})
    return run
  }
}

/** The session that replaces `existing`: version 1 when new, bumped when the token or upstream changed. */
function next(existing: Session | undefined, wanted: Omit<Session, 'version'>): Session {
  let version = 1
  if (existing !== undefined) {
    const rotated =
      existing.upstream !== wanted.upstream || !existing.messagingToken.equals(wanted.messagingToken)
    version = rotated ? existing.version + 1 : existing.version
  }
  return { ...wanted, version }
}

function same(existing: Session, entry: FileSession): boolean {
  return (
    existing.upstream === entry.upstream &&
    existing.team === entry.team &&
    existing.messagingToken.equals(entry.messagingToken)
  )
}
