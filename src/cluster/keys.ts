/**
 * Every Redis key the gateway uses, in one place, under one prefix (GATEWAY_REDIS_PREFIX) so several
 * gateways (or test runs) can share a Redis. A session's keys carry its id as a hash tag (`{kasmId}`), so the
 * keys one Lua script or MULTI touches live in one slot of a Redis Cluster.
 *
 * On a Redis Cluster ({@link ClusterKeyOptions.hashTagged}) the keys a transaction or script touches together
 * beyond one session's share a tag too: a person's sets (`{<sub>}`), an IdP session's (`{<sid>}`), the
 * registry with the re-seal job's lease (`{reseal}`, its compare-and-set checks that lease). Only there: with one
 * Redis (or Sentinel), renaming keys would orphan what an older version stored (a back-channel logout would miss
 * the cookie sessions made before the upgrade), so those keep their names.
 */
export interface ClusterKeys {
  readonly prefix: string
  /** Keys are laid out for a Redis Cluster (see {@link ClusterKeyOptions.hashTagged}). */
  readonly hashTagged: boolean
  /** Stream of a session's events (XADD MAXLEN ~). */
  events(kasmId: string): string
  /** Hash: the head of a session's stream (run, seq, runNo, closed, bytes, last: the stream's last id). */
  head(kasmId: string): string
  /** List, oldest first: `<entry id> <bytes>` of each stored entry, for trimming the stream to its byte budget. */
  sizes(kasmId: string): string
  /** Pub/sub channel (sharded on Redis Cluster): what each append added to a session's stream. */
  live(kasmId: string): string
  /** String: the reader lease; its value is the holder's fence. */
  lease(kasmId: string): string
  /** Counter the fences come from (seeded from Redis TIME so it keeps rising across a Redis restart). */
  fence(kasmId: string): string
  /** Hash kasmId -> JSON session record (token encrypted). */
  readonly sessions: string
  /** Pub/sub channel: a kasmId whose registry record changed. */
  readonly sessionsChannel: string
  /** String: a random id written once per Redis dataset; its absence means Redis lost its data. */
  readonly sessionsEpoch: string
  /** Hash replicaId -> `<kid> <expires ms>`: the key each replica seals with (the re-seal waits for agreement). */
  readonly keyrings: string
  /** String: the lease of a cluster-wide job (one replica runs it); its value is the holder's fence. */
  jobLease(name: string): string
  /** Counter the job's fences come from. */
  jobFence(name: string): string
  /** Hash kasmId -> ISO time: hand-registered sessions the Kasm sync did not find in Kasm, since when. */
  readonly kasmStale: string
  /** String: a cookie session by the SHA-256 of its id. */
  cookie(idHash: string): string
  /** Set of a subject's cookie session hashes (logout everywhere). */
  cookiesOf(sub: string): string
  /** Set of the cookie session hashes signed in through one identity-provider session (back-channel logout). */
  cookiesOfIdpSession(sid: string): string
  /** Pub/sub channel: comma-separated hashes of cookie sessions just revoked (their streams end). */
  readonly cookiesRevokedChannel: string
  /** String with an expiry: a back-channel logout token acted on, by the hash of its issuer and `jti`. */
  usedLogoutToken(hash: string): string
  /** Sorted set: an operator's open event streams over every replica, scored by expiry (ms). */
  streamSlots(sub: string): string
  /** Capped stream of audit records of authenticated actions (and the gateway's own changes). */
  readonly audit: string
  /** Capped stream of audit records of refused and anonymous requests, bounded apart from {@link audit}. */
  readonly auditRefused: string
  /** Rate-limit namespace (the key follows: `op:<sub>`, `ip:<address>`, or a route's own budget's). */
  readonly rateLimit: string
  /** String (sealed) with a TTL: a sign-in waiting for its callback, by the hash of its `state`. */
  loginAttempt(stateHash: string): string
  /** Counter of failed sign-ins from one client address in the current window. */
  signInFailures(address: string): string
  /** Counter of requests to the Slack Request URL whose signature failed, from one address, in the window. */
  slackSignatureFailures(address: string): string
  /** Counter of activities to the Teams messaging endpoint refused 401, from one address, in the window. */
  msteamsBearerFailures(address: string): string
  /** Sorted set: the replicas whose presence is current, scored by its expiry (ms). */
  readonly presenceReplicas: string
  /** Hash with a TTL: one replica's viewers, kasmId -> JSON counts per operator. */
  presenceOf(replicaId: string): string
  /** Hash: a session's board (its reader's health, who took which question). */
  board(kasmId: string): string
  /** Pub/sub channel: a kasmId whose board changed. */
  readonly boardChannel: string
  /** String (JSON) with a TTL: one webhook delivery's record (src/notify), by a hash of its key. */
  notifyDelivery(kasmId: string, hash: string): string
  /** List, newest first, capped: the keys of recent webhook deliveries (the admin API lists them). */
  readonly notifyRecent: string
  /** Sorted set: a team's report records (JSON), scored by their closing time (ms), trimmed to the retention. */
  report(team: string): string
  /** String with the retention as TTL: one report write or count claimed (src/report), by a hash of its key. */
  reportClaim(team: string, hash: string): string
  /** Sorted set: the teams with report records, scored by their last record's time (ms). */
  readonly reportTeams: string
  /** Hash: a linked chat account (src/identity), by its key `slack:<team>:<user>`. */
  chatLink(key: string): string
  /** Set of a person's linked chat account keys. */
  chatLinksOf(sub: string): string
  /** Set of the chat account keys linked in one identity-provider session (back-channel logout). */
  chatLinksOfIdpSession(sid: string): string
  /** Sorted set: every linked chat account key, scored by when its link ends (ms). */
  readonly chatLinks: string
  /** String (JSON) with a TTL: a chat message the gateway posted (src/chat), by a hash of what it is about. */
  chatMessage(kasmId: string, hash: string): string
  /** String with a TTL: a key seen once (a chat platform's signed request, a link token's id). */
  seen(hash: string): string
  /** Hash: where the Teams bot is installed (src/chat/msteams), conversation id → installation JSON. */
  readonly teamsInstallations: string
}

/** How {@link clusterKeys} lays keys out. */
export interface ClusterKeyOptions {
  /**
   * On a Redis Cluster: keys that one script or MULTI touches together get a common hash tag (see
   * {@link ClusterKeys}). Off (the default) with one Redis or Sentinel, where names must stay as they were.
   */
  readonly hashTagged?: boolean
}

/**
 * The name of the re-seal job's lease (cluster/reseal.ts), and so the hash tag the registry's keys share on a
 * Redis Cluster: the lease key is `job:{reseal}`, and the registry's compare-and-set script checks it.
 */
export const RESEAL_JOB = 'reseal'

/** Builds the key set for a prefix such as `krg:`. */
export function clusterKeys(prefix: string, options: ClusterKeyOptions = {}): ClusterKeys {
  const p = prefix
  const tagged = options.hashTagged === true
  /** `{value}` on a Redis Cluster (one slot per value), the value itself otherwise (names as they were). */
  const tag = (value: string): string => (tagged ? `{${value}}` : value)
  const registry = tagged ? `${p}{${RESEAL_JOB}}:` : p
  return {
    prefix: p,
    hashTagged: tagged,
    events: (id) => `${p}ev:{${id}}`,
    head: (id) => `${p}evh:{${id}}`,
    sizes: (id) => `${p}evs:{${id}}`,
    live: (id) => `${p}live:{${id}}`,
    lease: (id) => `${p}lease:{${id}}`,
    fence: (id) => `${p}fence:{${id}}`,
    sessions: `${registry}sessions`,
    sessionsChannel: `${p}sessions:changed`,
    sessionsEpoch: `${registry}sessions:epoch`,
    keyrings: `${registry}sessions:keyrings`,
    jobLease: (name) => `${p}job:{${name}}`,
    jobFence: (name) => `${p}jobfence:{${name}}`,
    kasmStale: `${p}kasm:stale`,
    cookie: (hash) => `${p}cookie:${hash}`,
    cookiesOf: (sub) => `${p}cookies-of:${tag(sub)}`,
    cookiesOfIdpSession: (sid) => `${p}cookies-of-sid:${tag(sid)}`,
    cookiesRevokedChannel: `${p}cookies:revoked`,
    usedLogoutToken: (hash) => `${p}logout-jti:${hash}`,
    streamSlots: (sub) => `${p}slots:${tag(sub)}`,
    audit: `${p}audit`,
    auditRefused: `${p}audit:refused`,
    rateLimit: `${p}rl:`,
    signInFailures: (address) => `${p}signin-fail:${address}`,
    slackSignatureFailures: (address) => `${p}slack-sig-fail:${address}`,
    msteamsBearerFailures: (address) => `${p}msteams-auth-fail:${address}`,
    loginAttempt: (hash) => `${p}login:${hash}`,
    presenceReplicas: `${p}presence:replicas`,
    presenceOf: (replica) => `${p}presence:of:{${replica}}`,
    board: (id) => `${p}board:{${id}}`,
    boardChannel: `${p}board:changed`,
    notifyDelivery: (id, hash) => `${p}notify:{${id}}:${hash}`,
    notifyRecent: `${p}notify:recent`,
    report: (team) => `${p}report:{${team}}`,
    reportClaim: (team, hash) => `${p}report:{${team}}:claim:${hash}`,
    reportTeams: `${p}report:teams`,
    chatLink: (key) => `${p}chatlink:${key}`,
    chatLinksOf: (sub) => `${p}chatlinks-of:${tag(sub)}`,
    chatLinksOfIdpSession: (sid) => `${p}chatlinks-of-sid:${tag(sid)}`,
    chatLinks: `${p}chatlinks`,
    chatMessage: (id, hash) => `${p}chatmsg:{${id}}:${hash}`,
    seen: (hash) => `${p}seen:${hash}`,
    teamsInstallations: `${p}msteams:installations`,
  }
}
