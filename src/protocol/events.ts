/** The Sidebar protocol's event stream as the gateway, its bus and the console page read it. */

/** One item of a session's event stream, as read from the runtime. */
export type StreamMessage =
  /** A trace event. `data` is the runtime's `data:` payload, byte for byte (lines joined with `\n`). */
  | {
      readonly kind: 'event'
      readonly run: string
      readonly seq: number
      readonly type: string
      readonly data: string
    }
  /** The run closed its trace without `done`: viewers get `event: closed` and their stream ends. */
  | { readonly kind: 'closed'; readonly run: string }

/**
 * Parses an SSE id `<run>:<seq>` of the sidebar protocol (the run itself may contain `:`); null unless seq
 * is a safe integer. The gateway reads the runtime's ids with it, and the console its stream's.
 */
export function parseEventId(id: string): { run: string; seq: number } | null {
  const at = id.lastIndexOf(':')
  if (at <= 0) return null
  const digits = id.slice(at + 1)
  if (!/^\d{1,15}$/.test(digits)) return null
  return { run: id.slice(0, at), seq: Number(digits) }
}
