import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Operator } from '../auth/operator.ts'
import { ChatLinkNotFound, StoreUnavailable, Unauthenticated } from '../errors.ts'
import { type ChatLinkRecord, chatAccountKey } from '../identity/chat-link-store.ts'
import { CHAT } from '../openapi/routes/chat.ts'

/** A link as the APIs show it: the account, the person, the times; never the IdP's tokens. */
export interface ChatLinkView {
  chat: string
  workspace: string
  workspaceName?: string
  user: string
  userName?: string
  sub: string
  name?: string
  roles: string[]
  teams: string[]
  state: ChatLinkRecord['state']
  /** ISO 8601 */
  createdAt: string
  expiresAt: string
}

/**
 * A link as the API shows it; `teams` the person's teams the caller may know of (all: their own links, an
 * admin of every team; otherwise the admin's teams among them).
 */
function view(record: ChatLinkRecord, teams: readonly string[]): ChatLinkView {
  return {
    chat: record.chat,
    workspace: record.workspace,
    ...(record.workspaceName === undefined ? {} : { workspaceName: record.workspaceName }),
    user: record.user,
    ...(record.userName === undefined ? {} : { userName: record.userName }),
    sub: record.sub,
    ...(record.name === undefined ? {} : { name: record.name }),
    roles: [...record.roles],
    teams: [...teams],
    state: record.state,
    createdAt: new Date(record.createdAt).toISOString(),
    expiresAt: new Date(record.expiresAt).toISOString(),
  }
}

interface LinkRoute {
  Params: { chat: string; workspace: string; user: string }
}

const LINK_PARAMS = {
  params: {
    type: 'object',
    properties: {
      chat: { type: 'string', enum: ['slack', 'msteams'] },
      // Slack's ids, or Entra's GUIDs (Teams' tenant and object ids).
      workspace: { type: 'string', pattern: '^([A-Z0-9]{2,32}|[0-9a-f-]{36})$' },
      user: { type: 'string', pattern: '^([A-Z0-9]{2,32}|[0-9a-f-]{36})$' },
    },
    required: ['chat', 'workspace', 'user'],
  },
} as const

/** Links an admin may see: those of a person in one of the admin's teams (`*`: every link). */
function adminSees(admin: Operator, record: ChatLinkRecord): boolean {
  if (admin.teams.has('*')) return true
  return !record.teams.includes('*') && record.teams.some((team) => admin.teams.has(team))
}

/** The person's teams an admin may know of: the admin's own among them (`*`: all of them). */
function teamsSeenBy(admin: Operator, record: ChatLinkRecord): string[] {
  return admin.teams.has('*') ? [...record.teams] : record.teams.filter((team) => admin.teams.has(team))
}

/** Links listed at most by the admin API. */
const MAX_LISTED = 1000

/**
 * Linked chat accounts (src/identity), under the base path:
 * - `GET api/chat-links` (any role): the caller's own links, which the console shows;
 * - `DELETE api/chat-links/:chat/:workspace/:user` (any role, CSRF-checked): removes one of them;
 * - `GET admin/chat-links` (admin): the links of people in the admin's teams (`*`: all), each naming only
 *   those of the person's teams the admin is in (the person's others are not the admin's to know);
 * - `DELETE admin/chat-links/:chat/:workspace/:user` (admin): removes one of those.
 * A link the caller may not see answers 404 `chat_link_not_found`, like one that does not exist. Removals
 * are audited. Without a chat adapter only the first exists, and lists nothing.
 */
export async function chatLinkRoutes(app: FastifyInstance): Promise<void> {
  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store')
  })
  const links = app.people.links
  if (links === null || app.chat === null) {
    // No chat adapter: nobody has a link, and the console asks anyway (it does not know).
    app.get('/api/chat-links', { schema: CHAT.mine, onRequest: app.requireAccess('read') }, async () => ({
      links: [],
    }))
    return
  }
  const operatorOf = (request: FastifyRequest): Operator => {
    if (!request.operator) throw new Unauthenticated()
    return request.operator
  }
  const shared = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn()
    } catch (err) {
      throw new StoreUnavailable('chat links', { cause: err })
    }
  }
  const keyOf = (request: FastifyRequest<LinkRoute>) => {
    const { chat, workspace, user } = request.params
    return chatAccountKey({ chat: chat === 'msteams' ? 'msteams' : 'slack', workspace, user })
  }

  app.get('/api/chat-links', { schema: CHAT.mine, onRequest: app.requireAccess('read') }, async (request) => {
    const mine = await shared(() => links.listOf(operatorOf(request).sub))
    return { links: mine.map((r) => view(r, r.teams)) }
  })

  app.delete<LinkRoute>(
    '/api/chat-links/:chat/:workspace/:user',
    {
      schema: { ...LINK_PARAMS, ...CHAT.unlinkMine },
      onRequest: app.requireAccess('read'),
      config: { audit: 'chat-links' },
    },
    async (request, reply) => {
      request.auditDetail.action = 'unlink'
      const key = keyOf(request)
      const found = await shared(() => links.get(key))
      if (found === null || found.sub !== operatorOf(request).sub) throw new ChatLinkNotFound()
      if ((await shared(() => links.remove(key))) === null) throw new ChatLinkNotFound()
      return reply.code(204).send()
    },
  )

  app.get(
    '/admin/chat-links',
    { schema: CHAT.all, onRequest: app.requireAccess('admin') },
    async (request) => {
      const admin = operatorOf(request)
      const all = await shared(() => links.list(MAX_LISTED))
      return { links: all.filter((r) => adminSees(admin, r)).map((r) => view(r, teamsSeenBy(admin, r))) }
    },
  )

  app.delete<LinkRoute>(
    '/admin/chat-links/:chat/:workspace/:user',
    {
      schema: { ...LINK_PARAMS, ...CHAT.unlink },
      onRequest: app.requireAccess('admin'),
      config: { audit: 'admin/chat-links' },
    },
    async (request, reply) => {
      request.auditDetail.action = 'delete'
      const key = keyOf(request)
      const found = await shared(() => links.get(key))
      if (found === null || !adminSees(operatorOf(request), found)) throw new ChatLinkNotFound()
      request.auditDetail.sub = found.sub
      if ((await shared(() => links.remove(key))) === null) throw new ChatLinkNotFound()
      return reply.code(204).send()
    },
  )
}
