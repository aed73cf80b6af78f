import { ERRORS, noContent, object, page, redirect, SECURITY, TIME } from '../schemas.ts'

const str = { type: 'string' } as const

/** A linked chat account (routes/chat-links.ts `ChatLinkView`): never the identity provider's tokens. */
const LINK = object(
  {
    chat: { type: 'string', enum: ['slack', 'msteams'] },
    workspace: str,
    workspaceName: str,
    user: str,
    userName: str,
    sub: str,
    name: str,
    roles: { type: 'array', items: str },
    teams: { type: 'array', items: str },
    state: { type: 'string', description: 'the link’s state (identity/chat-link-store.ts)' },
    createdAt: TIME,
    expiresAt: TIME,
  },
  ['chat', 'workspace', 'user', 'sub', 'roles', 'teams', 'state', 'createdAt', 'expiresAt'],
)
const LINKS = object({ links: { type: 'array', items: LINK } }, ['links'])

/** Slack's interaction answer: what Slack does with the modal (its own format). */
const SLACK_ACK = object(
  {
    response_action: { type: 'string', enum: ['update', 'errors', 'clear'] },
    view: { type: 'object', additionalProperties: true, description: 'a Slack modal view' },
    errors: { type: 'object', additionalProperties: { type: 'string' }, description: 'by block id' },
  },
  ['response_action'],
)

/** Slack's Request URL, the linking pages and linked accounts (routes/slack.ts, slack-link.ts, chat-links.ts). */
export const CHAT = {
  interactions: {
    tags: ['chat'],
    summary: 'Slack’s Request URL: interactions signed by Slack (`v0` signature, 5 minutes, never twice)',
    description: 'A form (`application/x-www-form-urlencoded`) with one `payload` field, as Slack sends it.',
    security: [],
    response: {
      200: {
        description: 'acknowledged: empty, or what Slack should do with the modal',
        anyOf: [SLACK_ACK, { type: 'null' }],
      },
      ...ERRORS,
    },
  },
  link: {
    tags: ['chat'],
    summary: 'The signed link Slack showed an unlinked user: sign in at the identity provider first',
    querystring: { type: 'object', properties: { t: { description: 'the link’s token (a string)' } } },
    response: { 302: redirect('to the identity provider'), ...ERRORS },
  },
  confirmPage: {
    tags: ['chat'],
    summary:
      'The page naming the Slack user, the workspace and the person: asking to confirm, or, once the code is sent, for the code',
    response: { 200: page('the confirmation, or the code’s form'), ...ERRORS },
  },
  confirm: {
    tags: ['chat'],
    summary:
      'Send a one-time code to the Slack user the link names, in a direct message (without Sign in with Slack; same origin)',
    response: { 303: redirect('to the page that asks for the code'), ...ERRORS },
  },
  code: {
    tags: ['chat'],
    summary: 'Record the link with the code the Slack user was sent (a form with `code`; same origin)',
    description:
      'A wrong code answers 400 `chat_link_code_wrong`: the form again (a page), saying how many tries are left; five wrong codes end the link.',
    response: { 200: page('linked'), ...ERRORS },
  },
  slackSignIn: {
    tags: ['chat'],
    summary: 'Confirm by Sign in with Slack as the user the link names',
    response: { 302: redirect('to Slack'), ...ERRORS },
  },
  slackCallback: {
    tags: ['chat'],
    summary: 'Slack’s answer to Sign in with Slack: the link recorded',
    response: { 200: page('linked'), ...ERRORS },
  },
  mine: {
    tags: ['chat'],
    security: SECURITY,
    summary: 'Your linked chat accounts',
    response: { 200: LINKS, ...ERRORS },
  },
  unlinkMine: {
    tags: ['chat'],
    security: SECURITY,
    summary: 'Remove one of your linked accounts (audited)',
    response: { 204: noContent('removed'), ...ERRORS },
  },
  all: {
    tags: ['chat', 'admin'],
    security: SECURITY,
    summary: 'The linked accounts of people in your teams (role admin)',
    response: { 200: LINKS, ...ERRORS },
  },
  unlink: {
    tags: ['chat', 'admin'],
    security: SECURITY,
    summary: 'Remove a linked account (role admin, audited)',
    response: { 204: noContent('removed'), ...ERRORS },
  },
} as const
