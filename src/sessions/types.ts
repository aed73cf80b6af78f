import type { Secret } from './secret.ts'

/**
 * Where a session came from; file sessions are replaced on reload, admin ones only by the admin API.
 * `launch`: launched through the gateway (`POST /admin/sessions`, the gateway minted its token); `kasm`:
 * registered through the admin API with `lifecycle: "kasm"`. Both follow Kasm's lifecycle: the Kasm sync
 * removes them once Kasm no longer has them; every other source is only flagged stale.
 */
export type SessionSource = 'file' | 'admin' | 'demo' | 'launch' | 'kasm'

/** Sources the Kasm sync may remove. */
export const KASM_LIFECYCLE_SOURCES: ReadonlySet<SessionSource> = new Set(['launch', 'kasm'])

/** A registered session: which runtime serves it, who may see it, and the token the gateway injects. */
export interface Session {
  /** Strict token: letters, digits, `-`, `_` (see {@link KASM_ID}). */
  readonly kasmId: string
  /** Absolute http(s) base URL of the runtime's routes, ending with `/`. */
  readonly upstream: string
  readonly team: string
  readonly messagingToken: Secret
  readonly source: SessionSource
  /** Bumped whenever the token or upstream changes, so readers reconnect with the new one. */
  readonly version: number
  /** The Kasm user a launched session runs as (`source: "launch"`): who destroys it in Kasm. */
  readonly kasmUserId?: string
}

/** The public view of a session: never the token. */
export interface SessionView {
  kasmId: string
  upstream: string
  team: string
  source: SessionSource
  version: number
  /** The Kasm user a launched session runs as. */
  kasmUserId?: string
  /** Set by the admin API when the Kasm sync found no such session in Kasm (hand-registered sessions only). */
  staleSince?: string
}

/**
 * A stored session record that does not open with the configured keys (wrong or removed key, tampering): what
 * the admin API shows of it, never its content.
 */
export interface UnreadableSession {
  kasmId: string
  /** The team the record names; null when the record is not even readable JSON. */
  team: string | null
  reason: import('./token-vault.ts').UnsealFailure
}

/** A session id is a strict token; anything else is refused before any lookup. */
export const KASM_ID = /^[A-Za-z0-9_-]{1,128}$/

/** What the admin API or a sessions file provides to register a session. */
export interface SessionInput {
  kasmId: string
  /** Omitted: built from GATEWAY_UPSTREAM_TEMPLATE. */
  upstream?: string
  team: string
  messagingToken: string
  source: SessionSource
  /** Launched sessions only: the Kasm user it runs as. */
  kasmUserId?: string
}

/**
 * The session registry: memory (embedded) or Redis (cluster), loaded from the sessions file and changed by
 * the admin API. Routes use {@link SessionRegistry.resolve}; nothing outside `sessions/` sees the store.
 */
export interface SessionRegistry {
  /** The session if it exists and the operator's teams include its team; otherwise SessionNotFound (404). */
  resolve(kasmId: string, operator: import('../auth/operator.ts').Operator): Promise<Session>
  /**
   * {@link SessionRegistry.resolve} without waiting, for a session held in memory that the operator may see;
   * undefined otherwise (then `resolve` answers, refusals included).
   */
  resolveHeld(kasmId: string, operator: import('../auth/operator.ts').Operator): Session | undefined
  get(kasmId: string): Promise<Session | undefined>
  list(): Promise<SessionView[]>
  /** Registers or replaces (token rotation) a session; returns its public view. */
  put(input: SessionInput): Promise<SessionView>
  /**
   * Moves a session to another upstream, token unchanged (the Kasm sync when Kasm reports a new address);
   * SessionConflict when the session is gone or no longer at `version`.
   */
  relocate(kasmId: string, upstream: string, version: number): Promise<SessionView>
  /** Removes a session; with `version`, only if it is still at that version (nothing re-registered it). */
  remove(kasmId: string, options?: { version?: number }): Promise<boolean>
  /** Stored records that cannot be opened (cluster mode; none in memory), in kasmId order. */
  unreadable(): Promise<UnreadableSession[]>
  /** Deletes an unreadable record; false when there is none (or it became readable meanwhile). */
  dropUnreadable(kasmId: string): Promise<boolean>
  /**
   * Throws RegistryUnreadable (503) while this replica holds stored records it cannot open: nothing is
   * sealed then ({@link SessionRegistry.put}, `relocate` and file reloads refuse too), so nothing gets a key
   * the other replicas may not have. The admin routes ask first, before they change anything (Kasm included).
   */
  checkWritable(): void
  /** Called after any change to a session (put, remove, reload), on this replica or another. */
  onChange(listener: (kasmId: string) => void): () => void
}
