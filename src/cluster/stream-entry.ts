import type { BrokerDelivery } from '../events/broker/broker.ts'
import type { BusMessage } from '../events/bus.ts'

/** How a replica turns a message into its SSE frame (the events folder's framing, done once per event). */
export type FrameFn = (message: BusMessage) => Buffer

/** One stream entry as ioredis returns it: `[id, [field, value, field, value, ...]]`. */
export type RawEntry = [id: string, fields: string[]]

/** A parsed entry of a session's event stream. */
export interface StreamEntry {
  readonly id: string
  readonly message: BusMessage
}

/** Encodes messages as the append script's arguments: 5 per message (kind, run, seq, type, data). */
export function encodeMessages(messages: readonly BusMessage[]): string[] {
  const args: string[] = []
  for (const m of messages) {
    if (m.kind === 'event') args.push('e', m.run, String(m.seq), m.type, m.data)
    else args.push('c', m.run, '', '', '')
  }
  return args
}

/** Decodes one entry; null for an entry this version does not understand (skipped, never fatal). */
export function decodeEntry([id, fields]: RawEntry): StreamEntry | null {
  const f: Record<string, string> = {}
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!
  const run = f.r
  if (run === undefined) return null
  if (f.k === 'c') return { id, message: { kind: 'closed', run } }
  if (f.k !== 'e' || f.t === undefined || f.d === undefined) return null
  const seq = Number(f.s)
  if (!Number.isSafeInteger(seq)) return null
  return { id, message: { kind: 'event', run, seq, type: f.t, data: f.d } }
}

/** The entries as deliveries, each framed once (entries this version cannot read are skipped). */
export function deliveriesOf(raw: readonly RawEntry[], frame: FrameFn): BrokerDelivery<string>[] {
  const out: BrokerDelivery<string>[] = []
  for (const entry of raw) {
    const decoded = decodeEntry(entry)
    if (decoded) out.push({ offset: decoded.id, message: decoded.message, frame: frame(decoded.message) })
  }
  return out
}

/**
 * Compares two stream ids (`ms-seq`) numerically. Both parts of the ids this gateway writes stay below
 * 2^53 (a run number near the epoch in ms and a runtime seq), so plain numbers compare them exactly.
 */
export function compareIds(a: string, b: string): number {
  const ai = a.indexOf('-')
  const bi = b.indexOf('-')
  const am = Number(ai < 0 ? a : a.slice(0, ai))
  const bm = Number(bi < 0 ? b : b.slice(0, bi))
  if (am !== bm) return am < bm ? -1 : 1
  const as = ai < 0 ? 0 : Number(a.slice(ai + 1))
  const bs = bi < 0 ? 0 : Number(b.slice(bi + 1))
  return as === bs ? 0 : as < bs ? -1 : 1
}
