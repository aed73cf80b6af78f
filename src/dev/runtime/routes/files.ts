import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { artifactPath, readArtifact } from '../artifacts.ts'
import { contentDisposition, INLINE_MIME } from '../attachments.ts'
import type { RuntimeCore } from '../core.ts'
import type { RouteAccess } from '../credentials.ts'
import { HttpError } from '../http-error.ts'
import { senderOf } from './messages.ts'

const ARTIFACTS = '/artifacts/'

/** Nothing served from here may run script on the viewer's origin, or be sniffed into something that can. */
function sandbox(reply: FastifyReply): FastifyReply {
  return reply.header('x-content-type-options', 'nosniff').header('content-security-policy', 'sandbox')
}

/**
 * Reads a multipart body that must hold exactly one part, a file named `file`, of at most `limit` bytes
 * (413 past it, with nothing kept). Every part is read to the end so the answer follows the whole body.
 */
async function readSinglePart(
  app: FastifyInstance,
  request: FastifyRequest,
  limit: number,
): Promise<{ data: Buffer; mime: string; filename: string }> {
  let upload: { data: Buffer; mime: string; filename: string } | null = null
  let extra: string | null = null
  try {
    // Room for one stray part of each kind, so a wrong body is named in the refusal rather than cut short.
    for await (const part of request.parts({ limits: { fileSize: limit, files: 2, fields: 2, parts: 3 } })) {
      const isFile = part.type === 'file'
      if (upload === null && extra === null && isFile && part.fieldname === 'file') {
        upload = { data: await part.toBuffer(), mime: part.mimetype, filename: part.filename }
        continue
      }
      if (isFile) part.file.resume()
      extra ??= part.fieldname
    }
  } catch (error) {
    if (error instanceof app.multipartErrors.RequestFileTooLargeError) {
      throw new HttpError(413, 'attachment_too_large', `an attachment may have ${limit} bytes`, { limit })
    }
    const { PartsLimitError, FilesLimitError, FieldsLimitError } = app.multipartErrors
    if (
      error instanceof PartsLimitError ||
      error instanceof FilesLimitError ||
      error instanceof FieldsLimitError
    ) {
      throw new HttpError(400, 'one_part_only', 'send exactly one part, a file named "file"')
    }
    throw error
  }
  if (extra !== null) {
    throw new HttpError(
      400,
      'one_part_only',
      `send exactly one part, a file named "file" (got ${JSON.stringify(extra)})`,
    )
  }
  if (upload === null) throw new HttpError(400, 'no_file', 'one part named "file" is required')
  return upload
}

/**
 * POST /attachments (multipart, one part named `file`) → 201; GET /attachments/<id>[?inline=1];
 * GET /artifacts/<file>.
 */
export function fileRoutes(app: FastifyInstance, core: RuntimeCore): void {
  const write: RouteAccess = { access: 'write', inbox: true }
  const read: RouteAccess = { access: 'observe', inbox: true }

  app.post('/attachments', { config: write }, async (request, reply) => {
    senderOf(core, request)
    if (!request.isMultipart()) {
      throw new HttpError(415, 'not_multipart', 'upload with multipart/form-data and one part named "file"')
    }
    const upload = await readSinglePart(app, request, core.options.attachmentBytes)
    return reply.code(201).send(core.attachments.put(upload.data, upload.mime, upload.filename))
  })

  app.get('/attachments/:id', { config: read }, async (request, reply) => {
    const item = core.attachments.get((request.params as { id: string }).id)
    if (item === null) throw new HttpError(404, 'not_found', 'no such attachment')
    const inline = (request.query as { inline?: unknown }).inline === '1' && INLINE_MIME.has(item.mime)
    return sandbox(reply)
      .header('content-type', item.mime)
      .header('content-disposition', contentDisposition(inline ? 'inline' : 'attachment', item.name))
      .header('cache-control', 'private, no-store')
      .send(item.data)
  })

  app.get(
    '/artifacts/*',
    { config: { access: 'observe', inbox: false } satisfies RouteAccess },
    async (request, reply) => {
      sandbox(reply)
      // The raw path, not the router's decoded parameter: traversal is judged on exactly what was sent.
      const pathname = (request.raw.url ?? '').split('?')[0] ?? ''
      const path = pathname.startsWith(ARTIFACTS) ? artifactPath(pathname.slice(ARTIFACTS.length)) : null
      const artifact = path === null ? null : readArtifact(core, path)
      if (path === null || artifact === null) {
        return reply
          .code(404)
          .header('cache-control', 'no-store')
          .send({ error: 'not_found', message: 'no such artifact' })
      }
      reply
        .header('content-type', artifact.contentType)
        .header('cache-control', artifact.immutable ? 'public, max-age=31536000, immutable' : 'no-store')
      if (artifact.download) {
        reply.header(
          'content-disposition',
          contentDisposition('attachment', path.split('/').pop() ?? 'artifact'),
        )
      }
      return reply.send(artifact.body)
    },
  )
}
