import type { HandoffRecord, OpenedRecord, QuestionRecord, ReportStore } from '../../src/report/types.ts'

/** The sessions of {@link seedWeek}, with their teams (register them for their open questions to count). */
export const SEED_SESSIONS = [
  { kasmId: 'expenses-7f3a', team: 'finance' },
  { kasmId: 'crm-merge-21', team: 'finance' },
  { kasmId: 'billing-export', team: 'support' },
] as const

/** Questions of {@link seedWeek} asked in the last hour and still open. */
export const SEED_OPEN = 3

/**
 * A week of a support team as the report's store would hold it (two teams, four people, answers through
 * every channel, some late, timeouts, cancelled, handoffs finished and run out, a few questions still open),
 * for the page's tests and pictures. Every question's opening is recorded, as the gateway does. Times are
 * spread deterministically over the last seven days before `now`.
 */
export async function seedWeek(store: ReportStore, now: number): Promise<void> {
  const people = [
    { sub: 'carol', name: 'Carol Jensen', via: 'console' as const },
    { sub: 'amir', name: 'Amir Haddad', via: 'console' as const },
    { sub: 'li', name: 'Li Wei', via: 'sidebar' as const },
    { sub: 'svc-ops', name: 'Ops automation', via: 'api' as const },
  ]
  const titles = [
    'Two receipts match the hotel line. Which one should I attach?',
    'Accept the “Overwrite existing export?” dialog?',
    'Which of the two ACME contacts is the one to keep?',
    'The approver field is empty. Who should approve this report?',
    'Submit the invoice batch now or wait for the 17:00 run?',
  ]
  const sessions = SEED_SESSIONS
  for (let i = 0; i < 90; i++) {
    // Denser in the last day, as a busy morning would be.
    const ageS = i < 30 ? (i * 2617) % 86_000 : 86_400 + ((i * 48_611) % (6 * 86_400 - 3600))
    const session = sessions[i % sessions.length] as (typeof sessions)[number]
    const person = people[(i * 7) % people.length] as (typeof people)[number]
    const waitS = 20 + ((i * 37) % 260)
    const closedAt = now - ageS * 1000
    const openedAt = closedAt - waitS * 1000
    const kind = i % 9 === 4 ? 'timeout' : i % 17 === 8 ? 'cancel' : 'reply'
    const late = kind === 'reply' && i % 11 === 3
    const deadline = openedAt + (late ? waitS - 15 : 300) * 1000
    const record: QuestionRecord = {
      kind: 'question',
      id: JSON.stringify(['question', session.kasmId, `run-${i}`, `q${i}`]),
      team: session.team,
      kasmId: session.kasmId,
      run: `run-2026${String(1000 + i)}-${(i * 2654435761).toString(16).slice(-6)}`,
      requestId: `q${(i % 4) + 1}`,
      title: titles[i % titles.length] as string,
      openedAt: new Date(openedAt).toISOString(),
      closedAt: new Date(kind === 'timeout' ? openedAt + 300_000 : closedAt).toISOString(),
      deadline: new Date(kind === 'timeout' ? openedAt + 300_000 : deadline).toISOString(),
      closedBy: kind,
      // Escalation as a notify file with steps at 90 s and 180 s would have sent it.
      step: kind === 'timeout' ? 2 : waitS > 180 ? 2 : waitS > 90 ? 1 : 0,
      sub: kind === 'reply' ? person.sub : null,
      name: kind === 'reply' ? person.name : null,
      via: kind === 'reply' ? person.via : null,
    }
    await store.add(opened(record))
    await store.add(record)
  }
  for (let i = 0; i < SEED_OPEN; i++) {
    const session = sessions[i % sessions.length] as (typeof sessions)[number]
    const openedAt = new Date(now - (5 + i * 17) * 60_000).toISOString()
    const title = titles[i] as string
    await store.add(
      opened({ ...session, run: `run-open-${i}`, requestId: 'q1', title, openedAt, deadline: null }),
    )
  }
  for (let i = 0; i < 8; i++) {
    const session = sessions[(i + 1) % sessions.length] as (typeof sessions)[number]
    const byPerson = i % 3 !== 2
    const person = people[i % 3] as (typeof people)[number]
    const waitS = byPerson ? 120 + i * 95 : 900
    const closedAt = now - (3600 + i * 70_000) * 1000
    const record: HandoffRecord = {
      kind: 'handoff',
      id: JSON.stringify(['handoff', session.kasmId, `h-${i}`]),
      team: session.team,
      kasmId: session.kasmId,
      run: `run-h${i}`,
      reason:
        i % 2 === 0 ? 'the merge needs an approval code sent to a phone' : 'a login only a person may do',
      openedAt: new Date(closedAt - waitS * 1000).toISOString(),
      closedAt: new Date(closedAt).toISOString(),
      endedBy: byPerson ? 'operator' : 'timeout',
      waitS,
      sub: byPerson ? person.sub : null,
      name: byPerson ? person.name : null,
      via: byPerson ? person.via : null,
    }
    await store.add(record)
  }
}

/** The record of a question's opening, as the gateway writes it when the question comes. */
function opened(
  q: Pick<QuestionRecord, 'team' | 'kasmId' | 'run' | 'requestId' | 'title' | 'openedAt' | 'deadline'>,
): OpenedRecord {
  return {
    kind: 'opened',
    id: JSON.stringify(['opened', q.kasmId, q.run, q.requestId]),
    team: q.team,
    kasmId: q.kasmId,
    run: q.run,
    requestId: q.requestId,
    title: q.title,
    openedAt: q.openedAt,
    deadline: q.deadline,
  }
}
