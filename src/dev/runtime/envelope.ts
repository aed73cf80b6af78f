import type { RuntimeCore } from './core.ts'
import { HttpError } from './http-error.ts'
import { isRecord } from './trace.ts'

const MAX_KEY_CHARS = 200

/** A write body's common part: the run it addresses and its idempotency key. */
export interface Envelope {
  body: Record<string, unknown>
  key: string
}

/**
 * Checks what every inbox write shares, in the runtime's order: a JSON object, no `sender` (the credential
 * decides it), no unknown field, `run` and `key` present, then the run (and `epoch`, when sent) must be the
 * ones served, else 409 with both in the body.
 *
 * `epoch` is accepted though the protocol's body lists omit it: GET /inbox says to "put run and epoch on
 * every write", so a client that does must not be refused as sending an unknown field.
 */
export function checkEnvelope(core: RuntimeCore, body: unknown, fields: ReadonlySet<string>): Envelope {
  if (!isRecord(body)) throw new HttpError(400, 'invalid_body', 'the body must be a JSON object')
  if (Object.hasOwn(body, 'sender')) {
    throw new HttpError(
      400,
      'sender_not_allowed',
      'the sender comes from the credential; drop the sender field',
    )
  }
  const unknown = Object.keys(body).filter((name) => !fields.has(name) && name !== 'epoch')
  if (unknown.length > 0) {
    throw new HttpError(400, 'unknown_field', `unknown field(s): ${unknown.join(', ')}`, { unknown })
  }
  if (typeof body.run !== 'string' || body.run === '') {
    throw new HttpError(400, 'invalid_body', 'run is required (the run id from GET /inbox or the info event)')
  }
  if (typeof body.key !== 'string' || body.key === '' || body.key.length > MAX_KEY_CHARS) {
    throw new HttpError(
      400,
      'invalid_body',
      `key is required: an idempotency key of 1-${MAX_KEY_CHARS} characters`,
    )
  }
  if (body.epoch !== undefined && typeof body.epoch !== 'string') {
    throw new HttpError(400, 'invalid_body', 'epoch must be a string')
  }
  if (body.run !== core.run || (body.epoch !== undefined && body.epoch !== core.epoch)) {
    throw new HttpError(409, 'run_mismatch', 'that is not the run being served', {
      run: core.run,
      epoch: core.epoch,
    })
  }
  return { body, key: body.key }
}

/** Canonical JSON (object keys sorted, recursively): "same content" for idempotent retries. */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) => {
    if (!isRecord(inner)) return inner
    return Object.fromEntries(
      Object.keys(inner)
        .sort()
        .map((name) => [name, inner[name]]),
    )
  })
}
