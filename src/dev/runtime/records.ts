/** The inbox's records as they appear on the wire (message/delivery/request/action events and GETs). */

import type { FieldDef } from '../../protocol/fields.ts'
import type { Sender } from './credentials.ts'

/** A message's delivery state; the last three are final. */
export type MessageState = 'pending' | 'queued' | 'dispatched' | 'responded' | 'unknown' | 'undelivered'

export const MESSAGE_STATES: readonly MessageState[] = [
  'pending',
  'queued',
  'dispatched',
  'responded',
  'unknown',
  'undelivered',
]

/** Order of progress: a state only ever moves to a higher rank. */
export const STATE_RANK: Record<MessageState, number> = {
  pending: 0,
  queued: 1,
  dispatched: 2,
  responded: 3,
  unknown: 3,
  undelivered: 3,
}

export interface MessageRecord {
  id: string
  run: string
  key: string
  sender: Sender
  text?: string
  attachments?: string[]
  reply_to?: string
  revision?: number
  values?: Record<string, unknown>
  state: MessageState
  /** The inbox revision of this record's last change (what `since=` compares). */
  rev: number
  received_at: string
  updated_at: string
  undelivered_reason?: string
  detail?: string
}

/** What the agent's loop is doing: decides which control actions are valid. */
export type LoopState = 'idle' | 'running' | 'escalation'

export type RequestClosedBy = 'reply' | 'timeout' | 'cancelled' | 'run_ended'

export interface RequestRecord {
  run: string
  request_id: string
  schema_version: 1
  revision: number
  title: string
  help?: string
  fields: FieldDef[]
  deadline: string
  state: 'open' | 'closed'
  /** `agent` for ask_human, `orchestrator` for POST /requests. */
  asked_by: 'agent' | 'orchestrator'
  created_at: string
  closed_by?: RequestClosedBy
  closed_at?: string
  /** The message id of the reply that closed it. */
  reply_id?: string
}

export type ActionName = 'stop' | 'finish_handoff' | 'ack'

export interface ActionRecord {
  id: string
  run: string
  key: string
  sender: Sender
  action: string
  args?: Record<string, unknown>
  /** `accepted`, then `stopped` for a stop once the loop has exited; `refused` in the wrong state. */
  state: 'accepted' | 'stopped' | 'refused'
  /** For a refusal: the state found (the loop's, or `stopping`/`closed`). */
  found?: string
  received_at: string
  updated_at: string
}
