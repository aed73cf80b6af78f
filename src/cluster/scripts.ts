import type { RedisClient } from './connections.ts'
import type { RawEntry } from './stream-entry.ts'

/**
 * The Lua scripts of cluster mode. Each runs atomically in Redis, which is the whole point: the fence check
 * and the append cannot be separated by another replica's takeover.
 */

/** Redis TIME in ms, as a decimal string without exponent. */
const nowMs = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function str(n) return string.format('%.0f', n) end
`

/**
 * Fenced append with per-run seq dedupe, trimmed to a count and a byte budget, published live.
 * KEYS: lease, head, events, sizes, the live channel (a channel, not a key: named here so that it hashes to
 * the session's slot like the keys). ARGV: PUBLISH or SPUBLISH, fence, maxlen, ttl ms, the caller's clock
 * (ms), max bytes, then 5 per message: kind (e|c), run, seq, type, data. The keys' expiry is refreshed once
 * per 1/24 of the ttl, not on every append. Returns -1 when the fence is not the lease holder's, else the
 * number of entries added.
 *
 * What it added is published on the live channel as JSON `[prev, [[id, [field, value, ...]], ...]]`, `prev`
 * being the stream's last id before the append (kept in the head as `last`): a subscriber whose cursor is
 * behind `prev` missed something and reads the stream (src/cluster/live-loop.ts).
 *
 * Entry ids are `<runNo>-<seq>`: runNo is fixed per run and rises with every new run (it is at least Redis
 * TIME in ms and above the stream's last id), so ids keep rising even after Redis lost everything, and a
 * viewer's `after=&run=` maps to an id range without scanning. `closed` takes the id after the run's last seq
 * and ends the run: nothing more of it is stored. Runtime seqs start at 1; the head's seq is 0 until one is.
 *
 * Every entry's id and size go on the sizes list too; once the stream holds more than maxlen entries or max
 * bytes, the oldest are popped from it and the stream is cut below the first one kept (XTRIM MINID), so the
 * budget is exact. `MAXLEN ~` stays as a backstop for entries the list does not know (it only makes the byte
 * count too high, which trims earlier, never later).
 */
const append = `${nowMs}
if redis.call('GET', KEYS[1]) ~= ARGV[2] then return -1 end
local h = redis.call('HMGET', KEYS[2], 'run', 'seq', 'runNo', 'closed', 'exp', 'bytes', 'last')
local run, seq, runNo, closed = h[1], tonumber(h[2]), h[3], h[4] == '1'
local now, ttl = tonumber(ARGV[5]), tonumber(ARGV[4])
local maxlen, maxbytes = tonumber(ARGV[3]), tonumber(ARGV[6])
local bytes = tonumber(h[6]) or 0
local added = 0
local prev = h[7]
if not prev then
  local tail = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)[1]
  prev = tail and tail[1] or '0-0'
end
local published = {}
local function keep(id, fields, size)
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], id, unpack(fields))
  redis.call('RPUSH', KEYS[4], id .. ' ' .. str(size))
  bytes = bytes + size
  added = added + 1
  published[added] = {id, fields}
end
for i = 7, #ARGV, 5 do
  local kind, mrun = ARGV[i], ARGV[i + 1]
  if (not run) or mrun ~= run then
    local n = now_ms()
    local prev = tonumber(runNo) or 0
    if n <= prev then n = prev + 1 end
    local last = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)[1]
    if last then
      local lastMs = tonumber(string.match(last[1], '^(%d+)-'))
      if n <= lastMs then n = lastMs + 1 end
    end
    run, seq, runNo, closed = mrun, 0, str(n), false
    redis.call('HSET', KEYS[2], 'run', run, 'runNo', runNo)
  end
  if not closed then
    if kind == 'e' then
      local s = tonumber(ARGV[i + 2])
      if s > seq then
        keep(runNo .. '-' .. ARGV[i + 2],
          {'k', 'e', 'r', mrun, 's', ARGV[i + 2], 't', ARGV[i + 3], 'd', ARGV[i + 4]},
          #ARGV[i + 4] + #ARGV[i + 3] + #mrun + 64)
        seq = s
      end
    else
      keep(runNo .. '-' .. str(seq + 1), {'k', 'c', 'r', mrun}, #mrun + 64)
      closed = true
    end
  end
end
local len = redis.call('LLEN', KEYS[4])
local cut
while len > maxlen or bytes > maxbytes do
  local entry = redis.call('LPOP', KEYS[4])
  if not entry then break end
  local space = string.find(entry, ' ', 1, true)
  cut = string.sub(entry, 1, space - 1)
  bytes = bytes - tonumber(string.sub(entry, space + 1))
  len = len - 1
end
if cut then
  local ms, sq = string.match(cut, '^(%d+)-(%d+)$')
  redis.call('XTRIM', KEYS[3], 'MINID', ms .. '-' .. str(tonumber(sq) + 1))
end
if bytes < 0 then bytes = 0 end
local last = prev
if added > 0 then last = published[added][1] end
if run then
  if math.abs(now - (tonumber(h[5]) or 0)) > ttl / 24 then
    redis.call('HSET', KEYS[2], 'seq', str(seq), 'closed', closed and '1' or '0', 'exp', ARGV[5], 'bytes', str(bytes),
      'last', last)
    redis.call('PEXPIRE', KEYS[2], ARGV[4])
    redis.call('PEXPIRE', KEYS[3], ARGV[4])
    redis.call('PEXPIRE', KEYS[4], ARGV[4])
  else
    redis.call('HSET', KEYS[2], 'seq', str(seq), 'closed', closed and '1' or '0', 'bytes', str(bytes), 'last', last)
  end
end
if added > 0 then redis.call(ARGV[1], KEYS[5], cjson.encode({prev, published})) end
return added
`

/**
 * A consistent snapshot for a new viewer: the head, the stream's last id (where the viewer joins the live
 * loop), the oldest stored entry of the current run (gap check) and the first page of the replay.
 * KEYS: head, events. ARGV: the viewer's run ('' for none), after ('' for none), page size.
 * Returns {lastId} when nothing is stored, else {lastId, run, seq, closed, oldest entry or false, entries}.
 */
const replay = `
local h = redis.call('HMGET', KEYS[1], 'run', 'runNo', 'seq', 'closed')
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)[1]
local lastId = '0-0'
if last then lastId = last[1] end
if not h[1] then return {lastId} end
local from = h[2] .. '-0'
local start = from
if ARGV[1] == h[1] and ARGV[2] ~= '' then start = '(' .. h[2] .. '-' .. ARGV[2] end
local oldest = redis.call('XRANGE', KEYS[2], from, '+', 'COUNT', 1)[1] or false
return {lastId, h[1], h[3], h[4], oldest, redis.call('XRANGE', KEYS[2], start, '+', 'COUNT', ARGV[3])}
`

/**
 * Takes each lease that is free (SET NX PX) and gives it a new fence from its counter, which only rises (seeded
 * from Redis TIME). One lease, or with one Redis a replica's asks of one turn. KEYS: lease 1, counter 1, lease
 * 2, counter 2, ... ARGV: lease ms, counter ttl ms. Returns each lease's fence, or 0 where another owner holds
 * it (a Lua array cannot hold nil).
 */
const acquire = `${nowMs}
local out = {}
for i = 1, #KEYS, 2 do
  if redis.call('SET', KEYS[i], '0', 'NX', 'PX', ARGV[1]) then
    if redis.call('EXISTS', KEYS[i + 1]) == 0 then redis.call('SET', KEYS[i + 1], str(now_ms())) end
    local f = redis.call('INCR', KEYS[i + 1])
    redis.call('PEXPIRE', KEYS[i + 1], ARGV[2])
    redis.call('SET', KEYS[i], str(f), 'PX', ARGV[1])
    out[#out + 1] = f
  else
    out[#out + 1] = 0
  end
end
return out
`

/**
 * Takes one of an operator's stream slots. KEYS: the operator's slot set. ARGV: member, max, ttl ms. Drops
 * the members whose expiry passed (their replica stopped renewing them), then adds this one unless `max` are
 * held. Returns 1 when taken, 0 at the cap.
 */
const takeSlot = `${nowMs}
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`

/** Renews this replica's slots of one operator. KEYS: the slot set. ARGV: ttl ms, then the members. */
const renewSlots = `${nowMs}
local expiry = now_ms() + tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', expiry, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return #ARGV - 1
`

/**
 * Extends each lease its fence still holds. One lease, or with one Redis a replica's renewals of one turn.
 * KEYS: the leases. ARGV: lease ms, then each lease's fence. Returns 1 (extended) or 0 (lost) per lease.
 */
const renew = `
local out = {}
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i + 1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
`

/** KEYS: lease. ARGV: fence. Deletes the lease only if this fence still holds it. */
const release = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`

/**
 * Compare-and-set of one session registry record, announced on the change channel when it happened: the
 * re-seal of a record never overwrites a write made since it was read, and deleting an unreadable record
 * never deletes a readable one written meanwhile.
 * KEYS: sessions hash, lease (checked only with a fence). ARGV: fence ('' for none), kasmId, the value read,
 * the new value ('' deletes), channel, announcement. Returns 1 when set, 0 when the record changed, -1 when
 * the fence no longer holds the lease.
 */
const casRecord = `
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then return -1 end
if redis.call('HGET', KEYS[1], ARGV[2]) ~= ARGV[3] then return 0 end
if ARGV[4] == '' then redis.call('HDEL', KEYS[1], ARGV[2]) else redis.call('HSET', KEYS[1], ARGV[2], ARGV[4]) end
redis.call('PUBLISH', ARGV[5], ARGV[6])
return 1
`

/** KEYS: a session's board hash. ARGV: field, expected value. Deletes the field only if it holds that value. */
const boardDelete = `
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
`

/** What {@link replay} returns (see there). */
export type ReplayReply =
  | [lastId: string]
  | [
      lastId: string,
      run: string,
      seq: string,
      closed: string | null,
      oldest: RawEntry | null,
      entries: RawEntry[],
    ]

/** The scripts as typed commands on a connection (ioredis EVALSHA with EVAL fallback). */
export interface ClusterCommands {
  krgAppend(
    lease: string,
    head: string,
    events: string,
    sizes: string,
    live: string,
    publish: 'PUBLISH' | 'SPUBLISH',
    ...args: (string | number)[]
  ): Promise<number>
  krgReplay(head: string, events: string, run: string, after: string, page: number): Promise<ReplayReply>
  /** `numberOfKeys` first: the script is defined with a variable number of keys. */
  krgAcquire(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<number[]>
  krgRenew(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<number[]>
  krgRelease(lease: string, fence: string): Promise<number>
  krgCasRecord(
    sessions: string,
    lease: string,
    fence: string,
    kasmId: string,
    expected: string,
    next: string,
    channel: string,
    announcement: string,
  ): Promise<number>
  krgBoardDelete(board: string, field: string, expected: string): Promise<number>
  krgTakeSlot(slots: string, member: string, max: number, ttlMs: number): Promise<number>
  krgRenewSlots(slots: string, ttlMs: number, ...members: string[]): Promise<number>
}

/** Defines the scripts on the command connection (idempotent) and returns it typed. */
export function defineScripts<C extends RedisClient>(redis: C): C & ClusterCommands {
  const r = redis as RedisClient & Partial<ClusterCommands>
  if (!r.krgAppend) {
    redis.defineCommand('krgAppend', { numberOfKeys: 5, lua: append })
    redis.defineCommand('krgReplay', { numberOfKeys: 2, lua: replay })
    redis.defineCommand('krgRelease', { numberOfKeys: 1, lua: release })
    redis.defineCommand('krgAcquire', { lua: acquire })
    redis.defineCommand('krgRenew', { lua: renew })
    redis.defineCommand('krgCasRecord', { numberOfKeys: 2, lua: casRecord })
    redis.defineCommand('krgBoardDelete', { numberOfKeys: 1, lua: boardDelete })
    redis.defineCommand('krgTakeSlot', { numberOfKeys: 1, lua: takeSlot })
    redis.defineCommand('krgRenewSlots', { numberOfKeys: 1, lua: renewSlots })
  }
  return redis as C & ClusterCommands
}
