import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { signInBinding } from '../auth/oidc/binding.ts'
import {
  ChatLinkCodeWrong,
  ChatLinkDeclined,
  ChatLinkInvalid,
  ChatLinkMismatch,
  ChatLinkNotSent,
  RouteNotFound,
  SignInNotConfigured,
  toErrorBody,
} from '../errors.ts'
import type { ChatLinkRecord } from '../identity/chat-link-store.ts'
import type { LinkRefusal } from '../identity/link-flow.ts'
import { CHAT } from '../openapi/routes/chat.ts'
import { chatLinkCode, chatLinkConfirm, chatLinked } from '../pages/catalogue.ts'

const GONE = 'is no longer waiting for you here: 10 minutes passed, or it was used'

/**
 * Linking a Slack account to a person, under the base path (pages for a browser):
 *
 * - `GET auth/slack-link?t=<token>`: the signed link Slack (or Teams) showed an unlinked user; 302 to the identity
 *   provider (a sign-in of its own, bound to this browser like `auth/login`'s).
 * - `GET auth/slack-link/confirm`: after the sign-in, the page naming the Slack user, the workspace and the
 *   person; once the code is sent, the page asking for it (or saying the Slack user declined).
 * - Without Sign in with Slack: `POST auth/slack-link/confirm` sends a one-time code to the Slack user the
 *   link names (a direct message from the app, with "This is not me"); `POST auth/slack-link/code` with the
 *   code typed records the link. Only someone signed in here who reads that Slack user's messages can.
 * - `GET auth/slack-link/slack` and `auth/slack-link/slack-callback`: with GATEWAY_SLACK_CLIENT_ID/_SECRET,
 *   the confirmation is Sign in with Slack as the user the link names, in the same browser.
 *
 * Each step is an audit record (`auth/slack-link`, actions `send_code`, `link`; "This is not me" in Slack
 * is `not_me`, chat/slack/link-codes.ts).
 */
export async function slackLinkRoutes(app: FastifyInstance): Promise<void> {
  const linking = app.chatLinking
  const slack = app.slack
  if (linking === null) return
  // Sign in with Slack proves a Slack account; a Teams account (or Slack without it) is proven by a code.
  const slackSignIn = slack?.signIn ?? null
  const withSlack = (account: { chat: string }) => account.chat === 'slack' && slackSignIn !== null
  const binding = signInBinding(app)
  const audit = { audit: 'auth/slack-link' }

  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store')
  })
  // The pages' forms: none, or the code's one field.
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: 1024 },
    (_request, body, done) => done(null, new URLSearchParams(String(body))),
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
    if (pending.codeSent) {
      const state = await linking.state(pending)
      if (state === 'expired') throw new ChatLinkInvalid(GONE)
      if (state === 'declined') throw new ChatLinkDeclined()
      return app.pages.send(reply, chatLinkCode({ account: pending.account, person: pending.person }))
    }
    return app.pages.send(
      reply,
      chatLinkConfirm({
        account: pending.account,
        person: pending.person,
        withSlack: withSlack(pending.account),
      }),
    )
  })

  const recorded = (request: FastifyRequest, reply: FastifyReply, result: ChatLinkRecord | LinkRefusal) => {
    if (result === 'expired') throw new ChatLinkInvalid(GONE)
    if (result === 'used') throw new ChatLinkInvalid('was used already')
    if (result === 'mismatch') throw new ChatLinkMismatch('sign in to Slack as the user the link names')
    if (result === 'declined') throw new ChatLinkDeclined()
    request.log.info(
      { sub: result.sub, chat: result.chat, workspace: result.workspace },
      'chat account linked',
    )
    return app.pages.send(reply, chatLinked({ account: result, expiresAt: result.expiresAt }))
  }

  // A click proves nothing of whose Slack account it is: the code sent to that account in Slack does.
  app.post('/auth/slack-link/confirm', { schema: CHAT.confirm, config: audit }, async (request, reply) => {
    request.auditDetail.action = 'send_code'
    app.auth.assertSameOrigin(request)
    const asked = linking.pending(request)
    if (asked !== null && withSlack(asked.account))
      throw new ChatLinkMismatch('confirm by signing in to Slack')
    const code = await linking.newCode(request, reply)
    if (code === 'declined') throw new ChatLinkDeclined()
    if (typeof code === 'string') throw new ChatLinkInvalid(GONE)
    const refused = await linking.sendCode(code)
    if (refused !== null) throw new ChatLinkNotSent(refused)
    return reply.redirect(`${app.config.basePath}auth/slack-link/confirm`, 303)
  })

  app.post('/auth/slack-link/code', { schema: CHAT.code, config: audit }, async (request, reply) => {
    request.auditDetail.action = 'link'
    app.auth.assertSameOrigin(request)
    const pending = linking.pending(request)
    if (pending !== null && withSlack(pending.account))
      throw new ChatLinkMismatch('confirm by signing in to Slack')
    if (pending === null) throw new ChatLinkInvalid(GONE)
    const form = request.body instanceof URLSearchParams ? request.body : new URLSearchParams()
    const result = await linking.confirmCode(request, reply, (form.get('code') ?? '').slice(0, 64))
    if (typeof result === 'object' && 'triesLeft' in result) {
      // Shown on the page that asks again, never thrown: the link still waits for the right code.
      const { status, body } = toErrorBody(new ChatLinkCodeWrong(String(result.triesLeft)))
      request.auditDetail.error = body.error
      const shown = { status, code: body.error, message: body.message }
      return app.pages.send(
        reply,
        chatLinkCode({ account: pending.account, person: pending.person, wrong: shown }),
      )
    }
    return recorded(request, reply, result)
  })

  app.get('/auth/slack-link/slack', { schema: CHAT.slackSignIn }, async (request, reply) => {
    if (slackSignIn === null) throw new RouteNotFound()
    const pending = linking.pending(request)
    if (pending === null) throw new ChatLinkInvalid(GONE)
    const url = await slackSignIn.begin(linking.binding(pending))
    return reply.header('referrer-policy', 'no-referrer').redirect(url.href, 302)
  })

  app.get(
    '/auth/slack-link/slack-callback',
    { schema: CHAT.slackCallback, config: audit },
    async (request, reply) => {
      request.auditDetail.action = 'link'
      if (slackSignIn === null) throw new RouteNotFound()
      const pending = linking.pending(request)
      if (pending === null) throw new ChatLinkInvalid(GONE)
      request.auditDetail.sub = pending.person.sub
      const query = new URLSearchParams(request.url.split('?')[1] ?? '')
      const proof = await slackSignIn.complete(query, linking.binding(pending))
      return recorded(request, reply, await linking.record(request, reply, proof))
    },
  )
}
