import { ERRORS, noContent, object, page, redirect, SECURITY, TIME } from '../schemas.ts'

/** What `auth/me` and `POST auth/session` answer (routes/auth.ts `MeBody`). */
const ME = object(
  {
    sub: { type: 'string' },
    name: { type: 'string' },
    roles: { type: 'array', items: { type: 'string' } },
    teams: { type: 'array', items: { type: 'string' }, description: '`*`: every team' },
    via: { type: 'string', enum: ['bearer', 'cookie', 'slack', 'msteams'] },
    expiresAt: { ...TIME, description: 'when the credential ends' },
  },
  ['sub', 'roles', 'teams', 'via', 'expiresAt'],
  'who the credential says you are, never the credential',
)

/** `auth/*` (routes/auth.ts, routes/signin.ts). */
export const AUTH = {
  startSession: {
    tags: ['auth'],
    summary: 'Trade a bearer for a cookie session (for EventSource)',
    security: [{ bearer: [] }],
    response: { 201: { ...ME, headers: { 'set-cookie': { type: 'string' } } }, ...ERRORS },
  },
  me: {
    tags: ['auth'],
    summary: 'Who you are (any credential, no role needed)',
    security: SECURITY,
    response: { 200: ME, ...ERRORS },
  },
  endSession: {
    tags: ['auth'],
    summary: 'End the cookie session (CSRF-checked)',
    security: [{ cookie: [] }],
    response: { 204: noContent('ended'), ...ERRORS },
  },
  login: {
    tags: ['auth'],
    summary: 'Sign in at the identity provider (or the demo’s one-time link `?ticket=`)',
    // Described, not typed: the route reads them itself (a repeated one is not refused by a validator).
    querystring: {
      type: 'object',
      properties: {
        return_to: { description: 'a path under the base path to come back to (a string)' },
        prompt: { description: '`login`: ask for the password again' },
        ticket: { description: 'the demo’s one-time link (a string)' },
      },
    },
    response: {
      302: redirect('to the identity provider'),
      303: redirect(
        'to the callback’s origin, back to `return_to` when signed in already, or the demo’s link used',
      ),
      ...ERRORS,
    },
  },
  callback: {
    tags: ['auth'],
    summary: 'The identity provider’s answer: a cookie session, then back to `return_to`',
    response: {
      200: page('after an identity provider on another site: a page that continues by itself'),
      303: redirect('to `return_to`'),
      ...ERRORS,
    },
  },
  logout: {
    tags: ['auth'],
    summary: 'Sign out here and at the identity provider (RP-initiated logout)',
    response: {
      303: redirect('to the identity provider’s end-session page, or `auth/logged-out`'),
      ...ERRORS,
    },
  },
  loggedOut: {
    tags: ['auth'],
    summary: 'The signed-out page',
    response: { 200: page('signed out') },
  },
  backChannelLogout: {
    tags: ['auth'],
    summary: 'OpenID Connect Back-Channel Logout 1.0, from the identity provider',
    description: 'A form (`application/x-www-form-urlencoded`) with one `logout_token` field.',
    response: {
      200: object({ ended: { type: 'integer', minimum: 0, description: 'cookie sessions ended' } }, [
        'ended',
      ]),
      ...ERRORS,
    },
  },
} as const
