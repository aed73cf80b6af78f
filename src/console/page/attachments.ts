import { parse as parseDisposition } from 'content-disposition'
import type { UploadedAttachment } from './records.ts'

/** What a person reads of an attachment instead of its id. */
export interface AttachmentName {
  readonly name: string
  /** Bytes; null when the download did not say. */
  readonly size: number | null
}

/** Attachment ids are short opaque tokens (as the gateway's route accepts them); anything else is not asked. */
const ID = /^[\x21-\x7e]{1,200}$/

/**
 * The names and sizes of a session's attachments. The upload's answer has them (what this page attached);
 * for the others (another person's, or before a reload) the download's own headers say them: its
 * Content-Disposition (the gateway writes it, `content-disposition` reads it) and Content-Length, read from
 * a GET that is aborted as soon as the headers are in, so the file itself is not fetched. Each id is asked
 * once; `onChange` runs when a name is known.
 */
export class AttachmentNames {
  readonly #sessionPath: string
  readonly #onChange: () => void
  readonly #known = new Map<string, AttachmentName | null>()
  readonly #asked = new Set<string>()

  constructor(sessionPath: string, onChange: () => void) {
    this.#sessionPath = sessionPath
    this.#onChange = onChange
  }

  /** What an upload answered. */
  remember(a: UploadedAttachment): void {
    this.#known.set(a.id, { name: a.name, size: a.size })
  }

  /** The name and size of `id`: known, `null` when the download does not say, `undefined` while asked. */
  get(id: string): AttachmentName | null | undefined {
    if (this.#known.has(id)) return this.#known.get(id) ?? null
    if (!ID.test(id)) return null
    void this.#ask(id)
    return undefined
  }

  async #ask(id: string): Promise<void> {
    if (this.#asked.has(id)) return
    this.#asked.add(id)
    const abort = new AbortController()
    let found: AttachmentName | null = null
    try {
      const res = await fetch(this.url(id), { credentials: 'same-origin', signal: abort.signal })
      if (res.ok) {
        const header = res.headers.get('content-disposition')
        const name = header === null ? undefined : parseDisposition(header).parameters.filename
        const length = Number(res.headers.get('content-length') ?? Number.NaN)
        if (name !== undefined && name !== '')
          found = { name, size: Number.isSafeInteger(length) && length >= 0 ? length : null }
      }
    } catch {
      found = null
    } finally {
      abort.abort()
    }
    this.#known.set(id, found)
    this.#onChange()
  }

  /** Where the file downloads. */
  url(id: string): string {
    return `${this.#sessionPath}attachments/${encodeURIComponent(id)}`
  }
}
