import { KasmDestroyFailed, KasmRefused, KasmUnreachable, SessionConflict } from '../errors.ts'
import type { Session } from '../sessions/types.ts'
import type { KasmClient } from './client.ts'
import { registryKasmId, sameKasmId } from './ids.ts'

/** How a launched session ended in Kasm: destroyed now, or already gone (Kasm no longer lists it). */
export type Destroyed = 'destroyed' | 'gone'

/**
 * Destroys a launched session in Kasm (`destroy_kasm` as the user it runs as), before its registration is
 * removed: a session nobody holds the token of must not keep running. Kasm refusing means "already gone" only
 * when `get_kasms` no longer lists the session (Kasm's error messages differ between releases; its list does
 * not). Otherwise throws KasmDestroyFailed (502) with Kasm's reason: the session still runs, and the caller
 * keeps its registration.
 */
export async function destroyLaunched(client: KasmClient, session: Session): Promise<Destroyed> {
  if (session.kasmUserId === undefined)
    throw new SessionConflict(
      `session ${session.kasmId} was launched by a gateway that did not record its Kasm user: end it in Kasm (the Kasm sync then removes it)`,
    )
  // As request_kasm writes it (dashed), whatever form the registry uses (GATEWAY_KASM_ID_FORM).
  const kasmId = registryKasmId(session.kasmId, 'dashed') ?? session.kasmId
  try {
    await client.destroyKasm({ kasmId, userId: session.kasmUserId })
    return 'destroyed'
  } catch (err) {
    if (!(err instanceof KasmRefused) && !(err instanceof KasmUnreachable)) throw err
    if (err instanceof KasmRefused) {
      const listed = await client.getKasms().catch(() => undefined)
      if (listed !== undefined && !listed.some((kasm) => sameKasmId(kasm.kasmId, kasmId))) return 'gone'
    }
    throw new KasmDestroyFailed(err.message, { cause: err })
  }
}
