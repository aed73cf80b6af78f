import type { FieldDef } from '../../protocol/fields.ts'

/** The inbox's records as the runtime sends them (events and GETs); only what the console reads. */

export interface MessageRecord {
  id: string
  run: string
  key?: string
  sender?: string
  text?: string
  attachments?: string[]
  reply_to?: string
  values?: Record<string, unknown>
  state: string
  rev?: number
  received_at?: string
  updated_at?: string
  undelivered_reason?: string
  detail?: string
}

/** A field as a request carries it: a known type, or one of a newer release. */
export type AnyField = Omit<FieldDef, 'type'> & { type: string }

export interface RequestRecord {
  run: string
  request_id: string
  revision: number
  title: string
  help?: string
  fields: AnyField[]
  deadline?: string
  state: 'open' | 'closed'
  closed_by?: string
  closed_at?: string
  reply_id?: string
}

export interface ActionRecord {
  id: string
  run?: string
  /** The sender's idempotency key: who it was, by the gateway's audit log. */
  key?: string
  action: string
  /** `accepted`, then `stopped` for a stop once the loop has exited; `refused`. */
  state: string
  found?: string
  received_at?: string
  updated_at?: string
}

export interface InboxState {
  run: string
  epoch?: string
  consumer?: string
  rev?: number
  open_requests?: string[]
  stopping?: boolean
  /** The tool call a stop waits for. */
  stopping_tool?: string
  closed?: boolean
}

/** What `POST attachments` answers. */
export interface UploadedAttachment {
  id: string
  mime: string
  name: string
  size: number
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
