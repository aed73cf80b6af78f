import type { ErrorBody } from '../errors.ts'
import type { Page, PageAction } from './page.ts'

/**
 * Every page the gateway shows a person, by situation. Builders are pure: they take what the page says and
 * return a {@link Page}; `app.pages.send` renders and sends it. Links are relative to the base path.
 */

/** The sign-in link, back to `returnTo` (a same-origin path) afterwards; `prompt: 'login'` asks the IdP to ask again. */
export function signInLink(returnTo?: string, prompt?: 'login'): string {
  const query = new URLSearchParams()
  if (returnTo !== undefined && returnTo !== '') query.set('return_to', returnTo)
  if (prompt !== undefined) query.set('prompt', prompt)
  const q = query.toString()
  return q === '' ? 'auth/login' : `auth/login?${q}`
}

const consoleLink: PageAction = { label: 'Open the console', to: '' }

/** A 401 to a browser navigation: the person is not (or no longer) signed in. */
export function signInRequired(options: { returnTo?: string; message?: string; code?: string }): Page {
  return {
    status: 401,
    title: 'Sign in to continue',
    lead: 'This page is only for people signed in to the gateway.',
    // "send a bearer token" is for programs; a person is simply not signed in.
    details:
      options.code === 'unauthenticated'
        ? ['You are not signed in, or your session here has ended.']
        : options.message === undefined
          ? []
          : [capitalise(options.message)],
    actions: [{ label: 'Sign in', to: signInLink(options.returnTo) }],
    ...(options.code === undefined ? {} : { code: options.code }),
  }
}

const signInFailures: Record<string, string> = {
  signin_denied: 'You did not let the gateway sign you in at your identity provider.',
  signin_state_invalid:
    'This sign-in does not match one started in this browser: it took longer than 10 minutes, was opened in another browser, or was used already.',
  signin_code_invalid:
    'Your identity provider did not accept the sign-in code; it may have been used already.',
  signin_token_invalid: "Your identity provider's answer did not pass the gateway's checks.",
  idp_refused:
    'Your identity provider refused the gateway. An administrator must check its client registration.',
  signin_rate_limited: 'Too many sign-ins failed from your network address. Wait a few minutes.',
}

/** Codes whose message ends in a reason the page's own words do not give (after its first `: `). */
const REASONED = new Set(['signin_code_invalid', 'signin_token_invalid', 'idp_refused'])

/**
 * Sign-in went wrong at the callback (or a one-time link was bad): say why, once (a code the page knows in
 * its own words, with only the reason its message adds; any other by the error's message), and offer to
 * start again, back to `returnTo` (where the person was going) when it is known.
 */
export function signInFailed(options: {
  status: number
  code: string
  message: string
  returnTo?: string
}): Page {
  const known = signInFailures[options.code]
  // Where the error's message names what the page's words do not (which check, the IdP's answer), that part.
  const at = options.message.indexOf(': ')
  const reason = REASONED.has(options.code) && at > 0 ? options.message.slice(at + 2) : null
  return {
    status: options.status,
    title: 'Sign-in failed',
    lead: known ?? 'The gateway could not sign you in.',
    details:
      known === undefined
        ? [capitalise(options.message)]
        : reason === null || reason.trim() === ''
          ? []
          : [`Details: ${capitalise(reason)}`],
    actions: [{ label: 'Sign in again', to: signInLink(options.returnTo) }, consoleLink],
    code: options.code,
  }
}

/** The identity provider is down or does not answer in time. */
export function idpUnavailable(): Page {
  return {
    status: 503,
    title: 'Your identity provider cannot be reached',
    lead: 'The gateway could not reach your identity provider to sign you in.',
    details: [
      'Try again in a minute. If this keeps happening, tell your administrator: the gateway logged the cause.',
    ],
    actions: [{ label: 'Try again', to: signInLink() }],
    code: 'idp_unavailable',
  }
}

/** The identity provider signed the person in, but nothing they hold maps to a role of the gateway. */
export function noRole(options: { message: string }): Page {
  return {
    status: 403,
    title: 'You have no role on this gateway',
    lead: capitalise(options.message),
    details: [
      'A role (viewer, operator or admin) comes from your identity provider. Ask your administrator to add you to a group that grants one, then sign in again.',
    ],
    actions: [{ label: 'Sign in with another account', to: signInLink(undefined, 'login') }],
    code: 'no_role',
  }
}

/**
 * Just signed in, after an identity provider on another site: the browser holds the new SameSite=Strict
 * cookie but would not send it on a redirect chain that began on that site, so this page continues itself.
 */
export function signedIn(options: { continueTo: string; name: string }): Page {
  return {
    status: 200,
    title: 'Signed in',
    lead: `You are signed in as ${options.name}.`,
    continueTo: options.continueTo,
    actions: [{ label: 'Continue', href: options.continueTo }],
  }
}

/** After sign-out (and, when the identity provider offers it, after signing out there too). */
export function signedOut(): Page {
  return {
    status: 200,
    title: 'You are signed out',
    lead: 'Your session on the gateway has ended on every replica, and its event streams are closed.',
    details: [
      'Your identity provider may have asked whether to sign you out there too. Whatever you answered, the next sign-in from this browser asks for your password.',
    ],
    actions: [{ label: 'Sign in again', to: signInLink() }],
  }
}

/** `auth/login` on a gateway without an identity provider. */
export function signInNotConfigured(): Page {
  return {
    status: 404,
    title: 'Sign-in is not set up',
    lead: 'This gateway has no identity provider to sign people in.',
    details: [
      'Programs sign in with a bearer token. To let people sign in, an administrator sets GATEWAY_OIDC_ISSUER, GATEWAY_OIDC_CLIENT_ID and GATEWAY_OIDC_CLIENT_SECRET.',
    ],
    code: 'signin_not_configured',
  }
}

/** A chat account as a link page names it: its name and id, and its workspace's. */
export interface ChatAccountShown {
  /** The chat (Slack when absent). */
  readonly chat?: 'slack' | 'msteams'
  readonly user: string
  readonly userName?: string
  readonly workspace: string
  readonly workspaceName?: string
}

/** How the pages name each chat, its users and workspaces, and where its app sends the code. */
const CHAT_WORDS = {
  slack: {
    name: 'Slack',
    workspace: 'Slack workspace',
    handle: '@',
    sent: 'as a direct message from its app',
  },
  msteams: { name: 'Teams', workspace: 'Microsoft Entra tenant', handle: '', sent: 'in a chat with its bot' },
} as const

function wordsOf(account: ChatAccountShown) {
  return CHAT_WORDS[account.chat ?? 'slack']
}

function accountLines(account: ChatAccountShown): string[] {
  const named = (name: string | undefined, id: string) => (name === undefined ? id : `${name} (${id})`)
  const w = wordsOf(account)
  return [
    `${w.name} user: ${account.userName === undefined ? account.user : `${w.handle}${account.userName} (${account.user})`}`,
    `${w.workspace}: ${named(account.workspaceName, account.workspace)}`,
  ]
}

/** "Olivia Operator (olivia)", or the `sub` alone. */
function personLine(person: { sub: string; name?: string }): string {
  return person.name === undefined ? person.sub : `${person.name} (${person.sub})`
}

/**
 * Linking a chat account, after signing in: the page names the Slack user and workspace and the person, and
 * asks to prove the Slack account is theirs: by a code sent to it in Slack (a form), or by signing in to
 * Slack (a link to Sign in with Slack).
 */
export function chatLinkConfirm(options: {
  account: ChatAccountShown
  person: { sub: string; name?: string }
  withSlack: boolean
}): Page {
  const w = wordsOf(options.account)
  return {
    status: 200,
    title: `Connect your ${w.name} account`,
    lead: `Answers this ${w.name} user gives in ${w.name} will be yours: ${personLine(options.person)}.`,
    details: [
      ...accountLines(options.account),
      options.withSlack
        ? 'Is this you? Sign in to Slack as this user to confirm. If you did not ask for this link in Slack yourself, do not go on: someone may have sent you theirs.'
        : `Is this you? The gateway sends a code to this ${w.name} user, ${w.sent}, and you type it here. If you did not ask for this link in ${w.name} yourself, do not go on: someone may have sent you theirs.`,
    ],
    ...(options.withSlack
      ? {
          actions: [
            { label: 'Confirm with Slack', to: 'auth/slack-link/slack' },
            { label: 'Cancel', to: '' },
          ],
        }
      : {
          form: { action: 'auth/slack-link/confirm', label: `Send me the code in ${w.name}` },
          actions: [{ label: 'Cancel', to: '' }],
        }),
  }
}

/**
 * The code was sent to the Slack user: the page asks for it (again, with why, after a wrong one). Only the
 * person who reads that user's direct messages has it; one who did not get it was sent someone else's link.
 */
export function chatLinkCode(options: {
  account: ChatAccountShown
  person: { sub: string; name?: string }
  wrong?: { status: number; code: string; message: string }
}): Page {
  const w = wordsOf(options.account)
  return {
    status: options.wrong?.status ?? 200,
    title: `Type the code from ${w.name}`,
    lead: `The gateway's app sent a code to this ${w.name} user, ${w.sent}. Typed here, it lets that ${w.name} user answer as you: ${personLine(options.person)}.`,
    details: [
      ...accountLines(options.account),
      `The code did not reach your own ${w.name}? Then this link is not yours: someone sent you theirs. Do not type a code anyone gives you.`,
    ],
    form: {
      action: 'auth/slack-link/code',
      label: 'Connect',
      input: {
        name: 'code',
        label: `Code from ${w.name}`,
        autocomplete: 'one-time-code',
        inputmode: 'numeric',
        maxLength: 16,
        ...(options.wrong === undefined ? {} : { error: capitalise(options.wrong.message) }),
      },
    },
    actions: [{ label: 'Cancel', to: '' }],
    ...(options.wrong === undefined ? {} : { code: options.wrong.code }),
  }
}

/** The link is recorded. */
export function chatLinked(options: { account: ChatAccountShown; expiresAt: number }): Page {
  const w = wordsOf(options.account)
  return {
    status: 200,
    title: `Your ${w.name} account is connected`,
    lead: `You can answer the runs’ questions from ${w.name} now: your answers carry your name and your roles.`,
    details: [
      ...accountLines(options.account),
      `The link lasts until ${new Date(options.expiresAt).toISOString().slice(0, 10)}; the console shows it, and you can remove it there.`,
    ],
    actions: [consoleLink],
  }
}

const chatLinkFailures: Record<string, string> = {
  chat_link_invalid: 'Nothing was connected.',
  chat_link_mismatch:
    'Nothing was connected: the Slack account you signed in to is not the one the link names.',
  chat_link_declined: 'Nothing was connected: the Slack user this link names said it was not them.',
  chat_link_not_sent: 'Nothing was connected: the chat did not take the message with the code.',
}

/** Linking a chat account did not happen: say why; a new link comes from the chat. */
export function chatLinkFailed(options: { status: number; code: string; message: string }): Page {
  return {
    status: options.status,
    title: 'Your chat account was not connected',
    lead: chatLinkFailures[options.code] ?? 'Nothing was connected.',
    details: [
      capitalise(options.message),
      'For a new link, click the answer button in Slack or Teams again: it shows you one only you can see.',
    ],
    actions: [consoleLink],
    code: options.code,
  }
}

const titles: Record<number, string> = {
  400: 'The request was not understood',
  403: 'You cannot do this',
  404: 'Not found',
  409: 'That conflicts with the current state',
  413: 'That is too large',
  429: 'Too many requests',
  502: 'The session runtime failed',
  503: 'Temporarily unavailable',
  504: 'The session runtime did not answer in time',
}

/**
 * The page for any error the gateway answers a navigation with: sign-in pages for the sign-in codes and
 * every 401, a plain explanation with the stable code for everything else. `returnTo` is the path the
 * person asked for (a 401 offers to come back to it after signing in).
 */
export function pageForError(status: number, body: ErrorBody, returnTo?: string): Page {
  if (body.error === 'idp_unavailable') return idpUnavailable()
  if (body.error === 'no_role') return noRole({ message: body.message })
  if (body.error === 'signin_not_configured') return signInNotConfigured()
  if (body.error.startsWith('chat_link_'))
    return chatLinkFailed({ status, code: body.error, message: body.message })
  if (body.error.startsWith('signin_') || body.error === 'idp_refused')
    return signInFailed({
      status,
      code: body.error,
      message: body.message,
      ...(returnTo === undefined ? {} : { returnTo }),
    })
  if (status === 401) {
    return signInRequired({
      ...(returnTo === undefined ? {} : { returnTo }),
      message: body.message,
      code: body.error,
    })
  }
  return {
    status,
    title: titles[status] ?? (status >= 500 ? 'Something went wrong' : 'The request was refused'),
    lead: capitalise(body.message),
    actions: [consoleLink],
    code: body.error,
  }
}

function capitalise(text: string): string {
  const t = text.trim()
  const sentence = t.charAt(0).toUpperCase() + t.slice(1)
  return /[.!?]$/.test(sentence) ? sentence : `${sentence}.`
}
