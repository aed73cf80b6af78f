import type { FastifyBaseLogger } from 'fastify'
import type { Notification } from '../notify/notification.ts'
import type { NotifyRoutes } from '../notify/targets.ts'
import { type Claim, claimField, parseClaim } from '../overview/claims.ts'
import type { SessionBoard } from '../summary/board.ts'
import { type Fanout, personLabel } from './fanout.ts'
import type { ClaimOutcome, EscalationMetrics } from './metrics.ts'
import { dueAt, makePlan, notifiedTargets, plannedTargets, stopped, withNext } from './plan.ts'
import {
  type EscalationState,
  type EscalationStep,
  escalationField,
  isEscalationField,
  parseEscalationState,
} from './state.ts'

/** What {@link Escalations} works with. */
export interface EscalationsOptions {
  readonly board: SessionBoard
  /** Whether this replica reads the session now: only the reader sends and writes records. */
  readonly reading: (kasmId: string) => boolean
  readonly routes: () => NotifyRoutes
  /** Whether a chat adapter sends (chat channels are in plans only then). */
  readonly chat: boolean
  readonly fanout: Fanout
  /** GATEWAY_CLAIM_TTL_S in ms. */
  readonly claimTtlMs: number
  readonly metrics: EscalationMetrics
  readonly log: FastifyBaseLogger
}

/** The item of a handoff pause in records and keys. */
const HANDOFF = 'escalation'
/** Timers fire this much after a step's time, so the step is due when they run. */
const SLACK_MS = 5

/** One open question (or pause) as every replica tracks it. */
interface Item {
  readonly kasmId: string
  readonly team: string
  readonly run: string
  readonly item: string
  /** Its opening notification (`request.opened` or `escalation.started`). */
  readonly opened: Notification
  readonly deadline: string | null
  /** The routes when this replica first saw it: its targets are found there by label. */
  readonly routes: NotifyRoutes
  /** ms since epoch: when this replica first saw it. */
  readonly seenAt: number
  closed: boolean
  /** Who holds it, as this replica last read the board, with the board's raw value. */
  claim: { readonly value: Claim; readonly raw: string } | null
  /** The board value of the claim this replica let lapse (a read from before its delete is not a new claim). */
  lapsedRaw: string | null
  /** The record as this replica (the reader) last wrote or read it. */
  record: EscalationState | null
  stepTimer: NodeJS.Timeout | undefined
  lapseTimer: NodeJS.Timeout | undefined
  /** Claim notices seen while another replica read (sent, deduped by the ledger, should this one take over). */
  notices: Notification[]
  /** Work on this item runs one piece at a time (records are read, changed and written). */
  chain: Promise<void>
}

const itemKey = (kasmId: string, run: string, item: string): string => `${kasmId}\u0000${run}\u0000${item}`

/**
 * The escalation engine. Every replica tracks the open questions and handoff pauses of the sessions it
 * watches (from the notify watcher) and the claims on them (from board changes); the replica reading a
 * session acts: it fixes each question's plan in the board record at first sight (`onlyIfAbsent`, so a
 * takeover and a restart follow the same plan, and a reload applies to questions opened after it), sends
 * each step when it is due while nobody holds the question, sends `request.claimed` / `request.unclaimed`
 * to the targets notified so far, and lets a claim lapse after GATEWAY_CLAIM_TTL_S (a board delete with the
 * expected value: once). Every send is a delivery of its own in the ledger, so a step is sent once across
 * replicas, restarts and takeovers: a new reader re-reads the record and sends what is due.
 */
export class Escalations {
  readonly #o: EscalationsOptions
  readonly #items = new Map<string, Item>()
  /** The work still queued on items closed while read here: their closing goes after it. */
  readonly #closing = new Map<string, { chain: Promise<void>; routes: NotifyRoutes }>()
  /** Per session, board reads run one at a time (a later read never lands before an earlier one). */
  readonly #reads = new Map<string, Promise<void>>()
  readonly #offBoard: () => void
  #closed = false

  constructor(options: EscalationsOptions) {
    this.#o = options
    this.#offBoard = options.board.onChange((kasmId) => {
      const sessions = kasmId === null ? new Set([...this.#items.values()].map((i) => i.kasmId)) : [kasmId]
      for (const id of sessions) this.#readClaims(id)
    })
  }

  /** Open items (tests). */
  get tracked(): number {
    return this.#items.size
  }

  /**
   * A question opened or a handoff started (on every replica); `deadline` is the question's (the pause's
   * `endsAt`). The reader fixes the plan and sends what is due.
   */
  opened(n: Notification, deadline: string | null): void {
    if (this.#closed) return
    const item = n.request?.request_id ?? HANDOFF
    const key = itemKey(n.kasmId, n.run, item)
    const known = this.#items.get(key)
    if (known !== undefined && known.opened.seq === n.seq && !known.closed) {
      if (this.#o.reading(n.kasmId)) this.#do(known, () => this.#advance(known))
      return
    }
    if (known !== undefined) this.#drop(key, known)
    const entry: Item = {
      kasmId: n.kasmId,
      team: n.team,
      run: n.run,
      item,
      opened: n,
      deadline,
      routes: this.#o.routes(),
      seenAt: Date.now(),
      closed: false,
      claim: null,
      lapsedRaw: null,
      record: null,
      stepTimer: undefined,
      lapseTimer: undefined,
      notices: [],
      chain: Promise.resolve(),
    }
    this.#items.set(key, entry)
    if (item !== HANDOFF) this.#readClaims(n.kasmId)
    if (this.#o.reading(n.kasmId)) this.#do(entry, () => this.#advance(entry))
  }

  /**
   * A question or pause closed (on every replica): its steps stop here. The reader counts how a claim on it
   * ended; the closing itself is sent by {@link sendClosing} (the watcher keeps it while another reads).
   */
  closed(n: Notification): void {
    const key = itemKey(n.kasmId, n.run, n.request?.request_id ?? HANDOFF)
    const entry = this.#items.get(key)
    if (entry === undefined) return
    entry.closed = true
    this.#drop(key, entry)
    if (!this.#o.reading(n.kasmId)) return
    this.#closing.set(key, { chain: entry.chain, routes: entry.routes })
    if (entry.claim !== null) this.#count(entry, n.request?.closed_by === 'reply' ? 'answered' : 'closed')
  }

  /**
   * Sends a closing (`request.closed`, `escalation.ended`) to the targets notified so far, and marks the
   * steps that did not go out `stopped` in the record.
   */
  async sendClosing(n: Notification): Promise<void> {
    const item = n.request?.request_id ?? HANDOFF
    // After the steps this replica was sending: a target gets a question's opening before its closing.
    const key = itemKey(n.kasmId, n.run, item)
    const before = this.#closing.get(key)
    this.#closing.delete(key)
    await before?.chain
    const field = escalationField(n.run, item)
    const record = await this.#read(n.kasmId, field)
    const targets = record === null ? this.#firstStep(n.team) : notifiedTargets(record)
    await this.#o.fanout.send(n, targets, before?.routes)
    const due = record?.steps.some((s) => s.state === 'due') === true
    if (record !== null && due) await this.#write(n.kasmId, field, stopped(record))
  }

  /** Sends a reminder to the targets notified so far. */
  async sendReminder(n: Notification): Promise<void> {
    const item = n.request?.request_id ?? HANDOFF
    const record = await this.#read(n.kasmId, escalationField(n.run, item))
    const targets = record === null ? this.#firstStep(n.team) : notifiedTargets(record)
    await this.#o.fanout.send(n, targets, this.#items.get(itemKey(n.kasmId, n.run, item))?.routes)
  }

  /** Sends a notification that is no question's (a run's end) to the targets without `after_s`. */
  async sendOther(n: Notification): Promise<void> {
    await this.#o.fanout.send(n, this.#firstStep(n.team))
  }

  /** This replica started reading the session: it takes up each open item where the record says. */
  readerStarted(kasmId: string): void {
    for (const entry of this.#items.values()) {
      if (entry.kasmId !== kasmId) continue
      this.#do(entry, async () => {
        // Another replica may have moved the record on since this one last read it.
        entry.record = null
        const notices = entry.notices
        entry.notices = []
        const record = await this.#read(kasmId, escalationField(entry.run, entry.item))
        // The steps that went out, again: the ledger drops what its predecessor recorded, and resumes a
        // delivery whose last attempt certainly failed (`retrying`) with the same id and body.
        for (const step of record?.steps ?? [])
          if (step.state === 'sent')
            await this.#o.fanout.send(
              { ...entry.opened, step: step.step },
              step.targets.filter((t) => t.outcome === 'sent'),
              entry.routes,
            )
        const notified = record === null ? [] : notifiedTargets(record)
        for (const notice of notices) await this.#o.fanout.send(notice, notified, entry.routes)
        if (entry.claim !== null)
          await this.#o.fanout.send(this.#claimed(entry, entry.claim.value), notified, entry.routes)
        await this.#advance(entry)
      })
    }
  }

  /** The session is no longer watched. */
  forget(kasmId: string): void {
    for (const [key, entry] of this.#items) if (entry.kasmId === kasmId) this.#drop(key, entry)
  }

  close(): void {
    this.#closed = true
    this.#offBoard()
    for (const [key, entry] of this.#items) this.#drop(key, entry)
  }

  #drop(key: string, entry: Item): void {
    clearTimeout(entry.stepTimer)
    clearTimeout(entry.lapseTimer)
    entry.stepTimer = undefined
    entry.lapseTimer = undefined
    if (this.#items.get(key) === entry) this.#items.delete(key)
  }

  #live(entry: Item): boolean {
    return (
      !this.#closed &&
      !entry.closed &&
      this.#items.get(itemKey(entry.kasmId, entry.run, entry.item)) === entry
    )
  }

  #do(entry: Item, work: () => Promise<void>): void {
    entry.chain = entry.chain.then(work).catch((err: unknown) => {
      this.#o.log.error({ err, kasmId: entry.kasmId, item: entry.item }, 'escalation step failed')
    })
  }

  #firstStep(team: string) {
    return plannedTargets(this.#o.routes(), team, this.#o.chat).filter((t) => t.afterS === 0)
  }

  /**
   * The record of an item, made from today's routes if it has none (or only one of an earlier pause). The
   * first write wins (`onlyIfAbsent`): whoever made it, every reader follows that plan.
   */
  async #record(entry: Item): Promise<EscalationState> {
    if (entry.record !== null) return entry.record
    const field = escalationField(entry.run, entry.item)
    let record = await this.#read(entry.kasmId, field)
    const stale = record !== null && entry.item === HANDOFF && record.seq !== entry.opened.seq
    if (record === null || stale) {
      const made = makePlan(plannedTargets(entry.routes, entry.team, this.#o.chat), {
        run: entry.run,
        item: entry.item,
        seq: entry.opened.seq,
        openedAt: entry.seenAt,
        deadline: entry.deadline,
      })
      const json = JSON.stringify(made)
      const won = await this.#o.board.set(entry.kasmId, field, json, !stale).catch((err: unknown) => {
        this.#o.log.warn({ err, kasmId: entry.kasmId }, 'escalation record not written; kept in memory')
        return true
      })
      record = won ? made : ((await this.#read(entry.kasmId, field)) ?? made)
      if (won) await this.#prune(entry.kasmId, entry.run)
    }
    entry.record = record
    return record
  }

  /**
   * Sends the steps that are due, in order, while the item is open, unclaimed and read here; arms a timer for
   * the next one. Records what went out.
   */
  async #advance(entry: Item): Promise<void> {
    if (!this.#live(entry) || !this.#o.reading(entry.kasmId)) return
    let record = await this.#record(entry)
    const held = entry.claim !== null
    const field = escalationField(entry.run, entry.item)
    let changed = false
    for (const step of record.steps) {
      if (held || step.state !== 'due') continue
      if (dueAt(record, step) > Date.now()) break
      record = await this.#sendStep(entry, record, step)
      changed = true
      if (!this.#live(entry)) break
    }
    // Its holder took it again: their lapse is over (a claim by someone else leaves it, so they are still told).
    if (held && record.lapsed != null && record.lapsed.sub === entry.claim?.value.sub) {
      record = { ...record, lapsed: null }
      changed = true
    }
    const next = withNext(record, held)
    if (changed || JSON.stringify(next.next) !== JSON.stringify(record.next)) {
      record = next
      await this.#write(entry.kasmId, field, record)
    }
    entry.record = record
    clearTimeout(entry.stepTimer)
    entry.stepTimer = undefined
    if (held) this.#armLapse(entry)
    else if (record.next !== null && this.#live(entry)) {
      const wait = Math.max(0, Date.parse(record.next.at) - Date.now()) + SLACK_MS
      entry.stepTimer = setTimeout(() => this.#do(entry, () => this.#advance(entry)), wait)
      entry.stepTimer.unref()
    }
  }

  async #sendStep(entry: Item, record: EscalationState, step: EscalationStep): Promise<EscalationState> {
    const n: Notification = { ...entry.opened, step: step.step }
    const targets = await this.#o.fanout.send(n, step.targets, entry.routes)
    for (const t of targets)
      this.#o.metrics.steps.inc({
        team: entry.team,
        kind: t.kind,
        outcome: t.outcome,
        reason: t.reason ?? '',
      })
    this.#o.log.info(
      { kasmId: entry.kasmId, run: entry.run, item: entry.item, step: step.step, targets: targets.length },
      'escalation step sent',
    )
    const sent: EscalationStep = { ...step, state: 'sent', at: new Date().toISOString(), targets }
    return { ...record, steps: record.steps.map((s) => (s.step === step.step ? sent : s)) }
  }

  /** Reads the session's claims once and hands each item's to it (in order of the reads). */
  #readClaims(kasmId: string): void {
    const items = [...this.#items.values()].filter((i) => i.kasmId === kasmId && i.item !== HANDOFF)
    if (items.length === 0) return
    const previous = this.#reads.get(kasmId) ?? Promise.resolve()
    const read = previous
      .then(async () => {
        const fields = await this.#o.board.read(kasmId)
        for (const entry of items) {
          const raw = fields.get(claimField(entry.run, entry.item)) ?? null
          this.#do(entry, () => this.#claimSeen(entry, raw))
        }
      })
      .catch((err: unknown) => this.#o.log.warn({ err, kasmId }, 'claims not read'))
      .finally(() => {
        if (this.#reads.get(kasmId) === read) this.#reads.delete(kasmId)
      })
    this.#reads.set(kasmId, read)
  }

  /** A claim appeared, went or changed hands on the board. */
  async #claimSeen(entry: Item, raw: string | null): Promise<void> {
    if (!this.#live(entry) || (entry.claim?.raw ?? null) === raw || (raw !== null && raw === entry.lapsedRaw))
      return
    const before = entry.claim
    const now = raw === null ? null : parseClaim(raw)
    entry.claim = now === null || raw === null ? null : { value: now, raw }
    const reading = this.#o.reading(entry.kasmId)
    const notices: Notification[] = []
    if (before !== null) {
      // Gone without our lapse (we clear `entry.claim` before deleting): given back, or it lapsed elsewhere.
      const lapsed = Date.now() >= Date.parse(before.value.at) + this.#o.claimTtlMs
      const reason = lapsed ? 'lapsed' : 'released'
      notices.push(this.#unclaimed(entry, before.value, reason))
      if (reading) this.#count(entry, reason)
      clearTimeout(entry.lapseTimer)
      entry.lapseTimer = undefined
    }
    if (entry.claim !== null) notices.push(this.#claimed(entry, entry.claim.value))
    if (!reading) {
      entry.notices.push(...notices)
      return
    }
    const record = await this.#record(entry)
    for (const notice of notices) await this.#o.fanout.send(notice, notifiedTargets(record), entry.routes)
    await this.#advance(entry)
  }

  /** Arms the lapse of the claim held now (at once when its time has passed). */
  #armLapse(entry: Item): void {
    const claim = entry.claim
    if (claim === null || entry.lapseTimer !== undefined) return
    const wait = Math.max(0, Date.parse(claim.value.at) + this.#o.claimTtlMs - Date.now()) + SLACK_MS
    entry.lapseTimer = setTimeout(() => {
      entry.lapseTimer = undefined
      this.#do(entry, () => this.#lapse(entry, claim))
    }, wait)
    entry.lapseTimer.unref()
  }

  /**
   * The claim held too long without an answer: removed if it is still the one armed for (the expected value:
   * one replica, once), the holder and the notified targets told, the steps go on.
   */
  async #lapse(entry: Item, claim: NonNullable<Item['claim']>): Promise<void> {
    if (!this.#live(entry) || entry.claim?.raw !== claim.raw || !this.#o.reading(entry.kasmId)) return
    const removed = await this.#o.board.delete(entry.kasmId, claimField(entry.run, entry.item), claim.raw)
    if (!removed) return
    entry.claim = null
    entry.lapsedRaw = claim.raw
    this.#count(entry, 'lapsed')
    this.#o.log.info({ kasmId: entry.kasmId, item: entry.item, holder: claim.value.sub }, 'claim lapsed')
    const notice = this.#unclaimed(entry, claim.value, 'lapsed')
    const lapsed = { ...claim.value, claimedAt: claim.value.at, at: new Date().toISOString() }
    const record = { ...(await this.#record(entry)), lapsed }
    entry.record = record
    // Before the notices: the holder's console says so from this record, not from the claim going away.
    await this.#write(entry.kasmId, escalationField(entry.run, entry.item), record)
    await this.#o.fanout.send(
      notice,
      [...notifiedTargets(record), { kind: 'person', label: personLabel(claim.value.sub) }],
      entry.routes,
    )
    await this.#advance(entry)
  }

  #claimed(entry: Item, claim: Claim): Notification {
    const { step: _step, ...opened } = entry.opened
    return {
      ...opened,
      type: 'request.claimed',
      key: [entry.kasmId, entry.run, 'claim', entry.item, claim.sub, claim.at].join('\u0000'),
      claim,
    }
  }

  #unclaimed(entry: Item, holder: Claim, reason: 'released' | 'lapsed'): Notification {
    const { step: _step, ...opened } = entry.opened
    return {
      ...opened,
      type: 'request.unclaimed',
      key: [entry.kasmId, entry.run, 'unclaim', entry.item, holder.sub, holder.at].join('\u0000'),
      unclaimed: { holder, reason },
    }
  }

  #count(entry: Item, outcome: ClaimOutcome): void {
    this.#o.metrics.claims.inc({ team: entry.team, outcome })
  }

  async #read(kasmId: string, field: string): Promise<EscalationState | null> {
    const value = (await this.#o.board.read(kasmId)).get(field)
    return value === undefined ? null : parseEscalationState(value)
  }

  async #write(kasmId: string, field: string, record: EscalationState): Promise<void> {
    await this.#o.board.set(kasmId, field, JSON.stringify(record)).catch((err: unknown) => {
      this.#o.log.warn({ err, kasmId }, 'escalation record not written')
    })
  }

  /** A new run's first record: the records of the session's earlier runs go. */
  async #prune(kasmId: string, run: string): Promise<void> {
    const fields = await this.#o.board.read(kasmId)
    for (const [field, value] of fields)
      if (isEscalationField(field) && !isEscalationField(field, run))
        await this.#o.board.delete(kasmId, field, value)
  }
}
