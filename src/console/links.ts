/**
 * The console's links to a session, shared by the page (the overview's rows, its browser notifications) and
 * the gateway (attention routing's webhooks), so every way in lands the person on the same place.
 *
 * `<base>sessions/<kasm_id>` opens the session where a person acts: its soonest open question, else its
 * handoff pause. `?run=<run>&request=<id>` names the question to put in view (a notification's), `?handoff`
 * the pause. A request id is only unique within its run (every run counts from `q1` again), so the link
 * carries the run: an old link is known for one when a later run has reused the id. A link without `run`
 * (older ones) names the question of the run now. A query, not a fragment: it survives the identity
 * provider's forms when the person signs in first.
 */

/** What a link puts in view: a question (of `run` when the link says), or the handoff pause. */
export type SessionFocus = { readonly request: string; readonly run?: string } | { readonly handoff: true }

/** The console's path of a session (`basePath` with its trailing `/`), with what to put in view. */
export function sessionPath(basePath: string, kasmId: string, focus?: SessionFocus | null): string {
  const path = `${basePath}sessions/${encodeURIComponent(kasmId)}`
  if (focus === undefined || focus === null) return path
  if (!('request' in focus)) return `${path}?handoff`
  const run = focus.run === undefined ? '' : `run=${encodeURIComponent(focus.run)}&`
  return `${path}?${run}request=${encodeURIComponent(focus.request)}`
}

/** Longer than any id a runtime makes: a query past it is not a link of ours. */
const ID_CHARS = 100

/** What a link's query asks to put in view (see {@link sessionPath}); null when nothing. */
export function focusOf(search: string): SessionFocus | null {
  const query = new URLSearchParams(search)
  const request = query.get('request')
  const run = query.get('run')
  if (request !== null && request !== '' && request.length <= ID_CHARS)
    return run !== null && run !== '' && run.length <= ID_CHARS ? { request, run } : { request }
  return query.has('handoff') ? { handoff: true } : null
}

/**
 * What a notification's link puts in view: the question it is about while it opens, the pause while it
 * starts; a closing or a run's end links to the session alone.
 */
export function notificationFocus(n: {
  readonly type: string
  readonly run: string
  readonly request?: { readonly request_id: string }
}): SessionFocus | null {
  if (n.type === 'request.opened' && n.request !== undefined)
    return { request: n.request.request_id, run: n.run }
  if (n.type === 'escalation.started') return { handoff: true }
  return null
}

/**
 * The Kasm viewer of a session on the deployment's Kasm origin (`GATEWAY_KASM_PUBLIC_URL`, else the
 * Developer API's), where a person takes the session over during a handoff; null when the origin is unknown.
 */
export function kasmViewerUrl(kasmOrigin: string | null, kasmId: string): string | null {
  if (kasmOrigin === null) return null
  return `${kasmOrigin}/desktop/${encodeURIComponent(kasmId)}/vnc/vnc.html`
}
