import type { AuditLog, AuditRecord } from './types.ts'

/** Records of one session's run that the lookups below read: the newest first. */
const LOOKUP_LIMIT = 50

function accepted(record: AuditRecord): boolean {
  return record.status >= 200 && record.status < 300
}

/**
 * The audit record of the reply that closed a question, sent through the gateway: of the accepted replies to it
 * (newest first in the log), the oldest, since later ones were refused with 409. Undefined when nobody
 * answered it here (it may have been answered at the runtime directly).
 */
export async function answerOf(
  audit: AuditLog,
  question: { readonly kasmId: string; readonly run: string; readonly requestId: string },
): Promise<AuditRecord | undefined> {
  const { kasmId, run, requestId } = question
  const records = await audit.recent({ limit: LOOKUP_LIMIT, kasmId, replyTo: requestId, run })
  return records.filter((r) => r.route === 'messages' && accepted(r)).at(-1)
}

/**
 * The audit record of the "I'm done, finish" (`finish_handoff`) that ended a run's handoff pause through the
 * gateway: the oldest accepted one among the run's newest records. Undefined when none is there.
 */
export async function handoffEndOf(
  audit: AuditLog,
  handoff: { readonly kasmId: string; readonly run: string },
): Promise<AuditRecord | undefined> {
  const records = await audit.recent({ limit: LOOKUP_LIMIT, kasmId: handoff.kasmId, run: handoff.run })
  return records.filter((r) => r.route === 'actions' && r.action === 'finish_handoff' && accepted(r)).at(-1)
}

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
  const answer = await answerOf(audit, question)
  if (answer === undefined) return null
  return {
    name: answer.name ?? answer.sub ?? 'someone',
    sub: answer.sub,
    ...(answer.via === undefined ? {} : { via: answer.via }),
    at: answer.at,
  }
}
