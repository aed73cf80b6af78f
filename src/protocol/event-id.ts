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
