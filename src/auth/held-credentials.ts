import type { Operator } from './operator.ts'

/** A long-lived stream (a session's events, a person's overview) held open on an operator's credential. */
export interface CredentialHolder {
  readonly operator: Operator
  /** Ends the stream because its credential is no longer good; the client reconnects and is refused. */
  end(why: 'revoked'): void
}

/**
 * Ends at once the holders whose cookie session is among `idHashes` (revoked on this replica or another):
 * a sign-out reaches open streams without waiting for the periodic recheck. Returns how many ended.
 */
export function endRevoked(holders: Iterable<CredentialHolder>, idHashes: readonly string[]): number {
  const revoked = new Set(idHashes)
  let ended = 0
  for (const holder of holders) {
    const id = holder.operator.cookieSessionId
    if (id === undefined || !revoked.has(id)) continue
    holder.end('revoked')
    ended++
  }
  return ended
}

/**
 * Checks every holder's credential now: an expired one ends at once, the others are asked `stillValid` once
 * per credential (one cookie session usually holds many tabs' streams). A check that cannot be made (the
 * store is down) keeps the stream: expiry is still enforced, and the next round asks again.
 */
export async function recheckHolders(
  holders: Iterable<CredentialHolder>,
  stillValid: (operator: Operator) => Promise<boolean>,
  onCheckFailed: (err: unknown) => void,
): Promise<void> {
  const now = Date.now()
  const verdicts = new Map<string, Promise<boolean>>()
  const checks: Promise<void>[] = []
  for (const holder of [...holders]) {
    const op = holder.operator
    if (now >= op.expiresAt) {
      holder.end('revoked')
      continue
    }
    const key = op.via === 'cookie' ? `c:${op.cookieSessionId ?? ''}` : `b:${op.sub}:${op.expiresAt}`
    let verdict = verdicts.get(key)
    if (verdict === undefined) {
      verdict = stillValid(op).catch((err: unknown) => {
        onCheckFailed(err)
        return true
      })
      verdicts.set(key, verdict)
    }
    checks.push(
      verdict.then((ok) => {
        if (!ok) holder.end('revoked')
      }),
    )
  }
  await Promise.all(checks)
}
