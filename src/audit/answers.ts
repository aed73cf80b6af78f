import type { AuditLog, AuditRecord } from './types.ts'

/** Who answered a question through the gateway, as the audit log says. */
export interface Answerer {
  readonly name: string
  readonly sub: string | null
  /** The chat the answer came from (`slack`), absent for the console and the API. */
  readonly via?: AuditRecord['via']
  /** ISO 8601 */
  readonly at: string
}

/**
 * The accepted reply to `requestId` of `run` in the session's audit records, or null when the gateway has
 * no record of one (answered elsewhere, or the record is not written yet). Of several accepted replies the
 * oldest closed the question: later ones were refused.
 */
export async function whoAnswered(
  audit: AuditLog,
  question: { kasmId: string; run: string; requestId: string },
): Promise<Answerer | null> {
  const records = await audit.recent({
    limit: 20,
    kasmId: question.kasmId,
    replyTo: question.requestId,
    run: question.run,
  })
  // Newest first.
  const answer = records.filter((r) => r.route === 'messages' && r.status >= 200 && r.status < 300).at(-1)
  if (answer === undefined) return null
  return {
    name: answer.name ?? answer.sub ?? 'someone',
    sub: answer.sub,
    ...(answer.via === undefined ? {} : { via: answer.via }),
    at: answer.at,
  }
}
