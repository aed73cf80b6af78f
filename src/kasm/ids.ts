import { KASM_ID } from '../sessions/types.ts'

/**
 * Kasm session ids. Kasm returns the same id as a dashed UUID (`4fa42139-aef3-4c86-929a-e479cda68857`, as in
 * `request_kasm` answers and the `/desktop/<id>/` paths of `port_map`) or as 32 plain hex digits
 * (`b057c3754cb6499cb8d3afeadd6bf0fc`, as `kasm_id` in `get_kasm_status` and `get_kasms` answers), depending on
 * the call and the release. The sync compares them by {@link sameKasmId}; a session is registered under the
 * form GATEWAY_KASM_ID_FORM names, which must be the one the viewer's URL carries (the sidebar derives its
 * base from `/desktop/<kasm_id>/vnc/`).
 */

/** The form session ids are registered under. */
export type KasmIdForm = 'dashed' | 'plain'

const HEX32 = /^[0-9a-f]{32}$/

/** The comparison key of a Kasm id (of a session or a user): lower case, without dashes. */
export function kasmIdKey(id: string): string {
  return id.replaceAll('-', '').toLowerCase()
}

/** Whether two ids name the same Kasm session, whatever form each is in. */
export function sameKasmId(a: string, b: string): boolean {
  return kasmIdKey(a) === kasmIdKey(b)
}

/**
 * The registry id of a Kasm session id in `form`; null when Kasm's id is not one a session may have (the
 * gateway's strict {@link KASM_ID}). An id that is not a UUID is kept as Kasm wrote it.
 */
export function registryKasmId(id: string, form: KasmIdForm): string | null {
  const key = kasmIdKey(id)
  let out = id
  if (HEX32.test(key)) {
    out =
      form === 'plain'
        ? key
        : `${key.slice(0, 8)}-${key.slice(8, 12)}-${key.slice(12, 16)}-${key.slice(16, 20)}-${key.slice(20)}`
  }
  return KASM_ID.test(out) ? out : null
}
