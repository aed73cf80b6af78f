import { z } from 'zod'
import { KASM_ID } from './types.ts'

/**
 * The rules a session must meet, shared by the sessions file, the admin API and {@link SessionRegistry.put}.
 * Messages never quote the value they refuse: the value may be a messaging token.
 */

const text = () => z.string({ required_error: 'is required', invalid_type_error: 'must be a string' })

/** A strict session id (see {@link KASM_ID}). */
export const kasmIdSchema = text().regex(KASM_ID, 'must be 1-128 letters, digits, "-" or "_"')

/** A Kasm user id (Kasm writes them as UUIDs, with or without dashes). */
export const kasmUserIdSchema = text().regex(
  /^[A-Za-z0-9-]{1,64}$/,
  'must be a Kasm user id (letters, digits, "-")',
)

/** A team name as it appears in operators' teams claim. */
export const teamSchema = text()
  .trim()
  .min(1, 'must be a non-empty string')
  .max(256, 'must be at most 256 characters')

/** A messaging token: it is sent as a header value, so printable ASCII without spaces. */
export const tokenSchema = text()
  .min(1, 'must not be empty')
  .max(4096, 'must be at most 4096 characters')
  .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces (it is sent as an HTTP header)')

/**
 * Checks an upstream base URL and normalises it to end with `/`. Returns the URL or the reason it is refused.
 * Credentials, a query or a fragment would be sent on every request or silently dropped: refused instead.
 */
export function normaliseUpstream(raw: string): { ok: true; url: string } | { ok: false; reason: string } {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return { ok: false, reason: 'must be an absolute http(s) URL' }
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { ok: false, reason: 'must be an absolute http(s) URL' }
  if (url.username !== '' || url.password !== '') return { ok: false, reason: 'must not contain credentials' }
  if (raw.includes('?')) return { ok: false, reason: 'must not have a query' }
  if (raw.includes('#')) return { ok: false, reason: 'must not have a fragment' }
  if (!url.pathname.endsWith('/')) url.pathname += '/'
  return { ok: true, url: url.href }
}

/** An upstream base URL, normalised to end with `/`. */
export const upstreamSchema = text().transform((raw, ctx) => {
  const result = normaliseUpstream(raw)
  if (result.ok) return result.url
  ctx.addIssue({ code: z.ZodIssueCode.custom, message: result.reason })
  return z.NEVER
})

/**
 * The upstream of a session registered without one, from GATEWAY_UPSTREAM_TEMPLATE; undefined without a
 * template. `kasmId` is already a strict token, so it needs no escaping.
 */
export function upstreamFromTemplate(
  template: string | undefined,
  kasmId: string,
): { ok: true; url: string } | { ok: false; reason: string } | undefined {
  if (template === undefined) return undefined
  return normaliseUpstream(template.replaceAll('{kasmId}', kasmId))
}

/** What {@link SessionRegistry.put} accepts (the admin body plus id and source). */
export const registrationSchema = z.object({
  kasmId: kasmIdSchema,
  upstream: upstreamSchema.optional(),
  team: teamSchema,
  messagingToken: tokenSchema,
  source: z.enum(['file', 'admin', 'demo', 'launch', 'kasm']),
  kasmUserId: kasmUserIdSchema.optional(),
})

/**
 * The body of `PUT /admin/sessions/:kasmId`; unknown fields refused. `lifecycle: "kasm"` asks the Kasm sync
 * to remove the session once Kasm no longer has it (default `manual`: only flagged stale).
 */
export const adminBodySchema = z
  .object({
    upstream: upstreamSchema
      .optional()
      .describe(
        'the runtime’s base URL (or from GATEWAY_UPSTREAM_TEMPLATE): http(s), no credentials, query or fragment',
      ),
    team: teamSchema,
    messagingToken: tokenSchema.describe('write-only: never returned'),
    lifecycle: z
      .enum(['manual', 'kasm'], { invalid_type_error: 'must be "manual" or "kasm"' })
      .optional()
      .describe('`kasm`: removed once Kasm no longer has the session (default `manual`: flagged stale)'),
  })
  .strict()
  .describe('unknown fields refused')

/** One entry of the sessions file; the token inline or in a file (a mounted Kubernetes secret). */
export const fileEntrySchema = z
  .object({
    kasmId: kasmIdSchema,
    upstream: upstreamSchema.optional(),
    team: teamSchema,
    messagingToken: tokenSchema.optional(),
    messagingTokenFile: text().min(1, 'must not be empty').optional(),
  })
  .strict()
  .superRefine((entry, ctx) => {
    const inline = entry.messagingToken !== undefined
    const fromFile = entry.messagingTokenFile !== undefined
    if (inline === fromFile)
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        message: 'exactly one of messagingToken or messagingTokenFile is required',
      })
  })

/** The sessions file as a whole; its entries are checked one by one to name the bad one. */
export const fileSchema = z
  .object(
    {
      sessions: z.array(z.unknown(), { required_error: 'is required', invalid_type_error: 'must be a list' }),
    },
    { invalid_type_error: 'must be an object with a "sessions" list' },
  )
  .strict()

/** One line per issue, `path: message`, for a 400 body or a boot error. */
export function formatIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => (issue.path.length > 0 ? `${issue.path.join('.')}: ${issue.message}` : issue.message))
    .join('; ')
}
