import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { signInBinding } from '../auth/oidc/binding.ts'
import { ChatLinkInvalid, ChatLinkMismatch, RouteNotFound, SignInNotConfigured } from '../errors.ts'
import type { ChatLinkRecord } from '../identity/chat-link-store.ts'
import type { LinkRefusal } from '../identity/link-flow.ts'
import { CHAT } from '../openapi/routes/chat.ts'
import { chatLinkConfirm, chatLinked } from '../pages/catalogue.ts'

const GONE = 'is no longer waiting for you here: 10 minutes passed, or it was used'

/**
 * Linking a Slack account to a person, under the base path (pages for a browser):
 *
 * - `GET auth/slack-link?t=<token>`: the signed link Slack showed an unlinked user; 302 to the identity
 *   provider (a sign-in of its own, bound to this browser like `auth/login`'s).
 * - `GET auth/slack-link/confirm`: after the sign-in, the page naming the Slack user, the workspace and the
 *   person, asking to confirm; `POST` records the link (without Sign in with Slack).
 * - `GET auth/slack-link/slack` and `auth/slack-link/slack-callback`: with GATEWAY_SLACK_CLIENT_ID/_SECRET,
 *   the confirmation is Sign in with Slack as the user the link names, in the same browser.
 *
 * Recording a link (or refusing to) is an audit record (`auth/slack-link`, action `link`).
 */
export async function slackLinkRoutes(app: FastifyInstance): Promise<void> {
  const linking = app.chatLinking
  const slack = app.slack
  if (linking === null || slack === null) return
  const binding = signInBinding(app)
  const audit = { audit: 'auth/slack-link' }

  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store')
  })
  // The confirmation page's form has no fields: its body is never read.
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: 1024 },
    (_request, _body, done) => done(null, null),
  )

  app.get<{ Querystring: { t?: unknown } }>(
    '/auth/slack-link',
    { schema: CHAT.link },
    async (request, reply) => {
      const signIn = app.auth.signIn
      if (signIn === null) throw new SignInNotConfigured()
      const token = request.query.t
      if (typeof token !== 'string' || token === '') throw new ChatLinkInvalid('has no token')
      const link = await app.people.linkTokens.verify(token)
      if (link === 'expired') throw new ChatLinkInvalid('has expired: a link works for 10 minutes')
      if (link === 'invalid') throw new ChatLinkInvalid('is not valid')
      const url = await signIn.begin({
        returnTo: app.config.basePath,
        bindingHash: binding.bind(request, reply),
        chatLink: link,
      })
      // The token must not linger in a Referer.
      return reply.header('referrer-policy', 'no-referrer').redirect(url.href, 302)
    },
  )

  app.get('/auth/slack-link/confirm', { schema: CHAT.confirmPage }, async (request, reply) => {
    const pending = linking.pending(request)
    if (pending === null) throw new ChatLinkInvalid(GONE)
    return app.pages.send(
      reply,
      chatLinkConfirm({ account: pending.account, person: pending.person, withSlack: slack.signIn !== null }),
    )
  })

  const recorded = (request: FastifyRequest, reply: FastifyReply, result: ChatLinkRecord | LinkRefusal) => {
    if (result === 'expired') throw new ChatLinkInvalid(GONE)
    if (result === 'used') throw new ChatLinkInvalid('was used already')
    if (result === 'mismatch') throw new ChatLinkMismatch('sign in to Slack as the user the link names')
    request.log.info(
      { sub: result.sub, chat: result.chat, workspace: result.workspace },
      'chat account linked',
    )
    return app.pages.send(reply, chatLinked({ account: result, expiresAt: result.expiresAt }))
  }

  app.post('/auth/slack-link/confirm', { schema: CHAT.confirm, config: audit }, async (request, reply) => {
    request.auditDetail.action = 'link'
    app.auth.assertSameOrigin(request)
    // With Sign in with Slack configured, a click alone does not prove whose Slack account it is.
    if (slack.signIn !== null) throw new ChatLinkMismatch('confirm by signing in to Slack')
    return recorded(request, reply, await linking.record(request, reply))
  })

  app.get('/auth/slack-link/slack', { schema: CHAT.slackSignIn }, async (request, reply) => {
    if (slack.signIn === null) throw new RouteNotFound()
    const pending = linking.pending(request)
    if (pending === null) throw new ChatLinkInvalid(GONE)
    const url = await slack.signIn.begin(linking.binding(pending))
    return reply.header('referrer-policy', 'no-referrer').redirect(url.href, 302)
  })

  app.get(
    '/auth/slack-link/slack-callback',
    { schema: CHAT.slackCallback, config: audit },
    async (request, reply) => {
      request.auditDetail.action = 'link'
      if (slack.signIn === null) throw new RouteNotFound()
      const pending = linking.pending(request)
      if (pending === null) throw new ChatLinkInvalid(GONE)
      request.auditDetail.sub = pending.person.sub
      const query = new URLSearchParams(request.url.split('?')[1] ?? '')
      const proof = await slack.signIn.complete(query, linking.binding(pending))
      return recorded(request, reply, await linking.record(request, reply, proof))
    },
  )
}
