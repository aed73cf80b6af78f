import { createHash, randomBytes } from 'node:crypto'

/** An uploaded file as POST /attachments describes it. */
export interface AttachmentMeta {
  id: string
  mime: string
  name: string
  size: number
  sha256: string
}

interface Stored extends AttachmentMeta {
  data: Buffer
}

/** Images that may be shown inline (`?inline=1`); nothing else can render on the viewer's origin. */
export const INLINE_MIME = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp'])

/** A MIME type safe to echo in Content-Type; anything odder becomes application/octet-stream. */
const MIME = /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/i

/**
 * Uploaded attachments, in memory for the life of the runtime (not per run: an upload may be referenced by
 * a message sent just after a new run started, and ids are unguessable).
 */
export class AttachmentStore {
  private readonly items = new Map<string, Stored>()

  /** Keeps an upload and returns its description. */
  put(data: Buffer, mime: string | undefined, filename: string | undefined): AttachmentMeta {
    const id = `att_${randomBytes(12).toString('hex')}`
    const meta: AttachmentMeta = {
      id,
      mime: mime !== undefined && MIME.test(mime) ? mime.toLowerCase() : 'application/octet-stream',
      name: cleanName(filename),
      size: data.length,
      sha256: createHash('sha256').update(data).digest('hex'),
    }
    this.items.set(id, { ...meta, data })
    return meta
  }

  get(id: string): (AttachmentMeta & { data: Buffer }) | null {
    return this.items.get(id) ?? null
  }

  has(id: string): boolean {
    return this.items.has(id)
  }
}

/** The last path segment without control characters; `attachment` when nothing is left. */
function cleanName(filename: string | undefined): string {
  const base = (filename ?? '').split(/[\\/]/).pop() ?? ''
  // biome-ignore lint/suspicious/noControlCharactersInRegex: stripping control characters is the point
  const clean = base.replace(/[\u0000-\u001f\u007f]/g, '').trim()
  return clean === '' || clean === '.' || clean === '..' ? 'attachment' : clean.slice(0, 255)
}

/** A Content-Disposition value with an ASCII fallback and the UTF-8 name (RFC 6266). */
export function contentDisposition(kind: 'attachment' | 'inline', name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_')
  return `${kind}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`
}
