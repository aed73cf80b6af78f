import { ERRORS, object, SECURITY, TIME } from '../schemas.ts'

const str = { type: 'string' } as const

/** An installation of the Teams bot (chat/msteams/installations.ts), with its notify-file entry. */
const INSTALLATION = object(
  {
    conversationId: { type: 'string', description: 'the conversation id for the notify file (`19:…`)' },
    serviceUrl: { type: 'string', description: 'the connector URL for the notify file' },
    serviceUrlAllowed: {
      type: 'boolean',
      description: 'the serviceUrl is within GATEWAY_TEAMS_SERVICE_URLS (the bot can post there)',
    },
    tenantId: str,
    conversationType: { type: 'string', description: '`channel` or `groupChat`' },
    teamId: str,
    teamName: str,
    channelName: str,
    installedAt: TIME,
    updatedAt: TIME,
    notifyEntry: {
      type: 'string',
      description: 'the line to paste under a team in GATEWAY_NOTIFY_FILE',
    },
  },
  [
    'conversationId',
    'serviceUrl',
    'serviceUrlAllowed',
    'tenantId',
    'conversationType',
    'installedAt',
    'updatedAt',
    'notifyEntry',
  ],
)

/** An invoke's answer as Teams reads it (`adaptiveCard/action`: the card for the person who clicked). */
const INVOKE_ANSWER = {
  type: 'object',
  description: 'an invoke response: `{statusCode, type, value}` (the card for the person who clicked)',
  properties: {
    statusCode: { type: 'integer' },
    type: str,
    value: { description: 'an Adaptive Card, or a message' },
  },
  additionalProperties: true,
} as const

/** The Teams bot's messaging endpoint and where it is installed (routes/msteams.ts). */
export const MSTEAMS = {
  messages: {
    tags: ['chat'],
    summary:
      'The Teams bot’s messaging endpoint: Bot Framework activities, each with a bearer token the Bot Framework signed for this bot',
    description:
      'A Bot Framework Activity (JSON). Refused 401 unless its bearer token is signed by an endorsed key of the Bot Framework’s JWKS, for this app, unexpired, with a `serviceurl` claim equal to the activity’s `serviceUrl`, from GATEWAY_TEAMS_TENANT_ID. Past 100 such refusals from one address in 5 minutes, its further ones are 429 (`Retry-After`); a valid activity is still served.',
    security: [],
    response: {
      200: { description: 'taken: empty, or an invoke’s answer', anyOf: [INVOKE_ANSWER, { type: 'null' }] },
      ...ERRORS,
    },
  },
  conversations: {
    tags: ['admin'],
    security: SECURITY,
    summary: 'Where the Teams bot is installed: each conversation with its notify-file entry',
    response: {
      200: object({ conversations: { type: 'array', items: INSTALLATION } }, ['conversations']),
      ...ERRORS,
    },
  },
}
