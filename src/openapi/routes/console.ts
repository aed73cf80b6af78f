import { ERRORS, noContent, object, page, redirect, SECURITY, TIME, text } from '../schemas.ts'

const str = { type: 'string' } as const
const int = { type: 'integer', minimum: 0 } as const
const seconds = { type: ['number', 'null'] } as const
const nullable = { type: ['string', 'null'] } as const

const NAME_AT = object({ name: str, at: TIME }, ['name', 'at'])

/** Questions by escalation step: `0` to `5`, `6+` (only those that occur). */
const STEP_COUNTS = {
  type: 'object',
  propertyNames: { pattern: '^([0-5]|6\\+)$' },
  additionalProperties: int,
} as const

/** report/stats.ts `QuestionStats`. */
const QUESTIONS = object(
  {
    questions: int,
    answered: int,
    inTime: int,
    late: int,
    timeouts: int,
    cancelled: int,
    runEnded: int,
    other: { ...int, description: 'closed in a way this gateway has no word for' },
    stillOpen: { ...int, description: 'asked in the window, not closed yet' },
    waited: { ...int, description: 'answered + timeouts' },
    inTimeShare: seconds,
    medianAnswerS: seconds,
    p90AnswerS: seconds,
    via: object({ console: int, sidebar: int, api: int, slack: int, msteams: int, unknown: int }, [
      'console',
      'sidebar',
      'api',
      'slack',
      'msteams',
      'unknown',
    ]),
    bySteps: {
      ...object({ answered: STEP_COUNTS, timedOut: STEP_COUNTS }, ['answered', 'timedOut']),
      description:
        'How the answered and timed-out questions ended by the highest escalation step sent before they closed (0: before any escalation)',
    },
  },
  [
    'questions',
    'answered',
    'inTime',
    'late',
    'timeouts',
    'cancelled',
    'runEnded',
    'other',
    'stillOpen',
    'waited',
    'inTimeShare',
    'medianAnswerS',
    'p90AnswerS',
    'via',
    'bySteps',
  ],
)

/** report/stats.ts `HandoffStats`. */
const HANDOFFS = object(
  { handoffs: int, byPerson: int, ranOut: int, runEnded: int, medianWaitS: seconds, p90WaitS: seconds },
  ['handoffs', 'byPerson', 'ranOut', 'runEnded', 'medianWaitS', 'p90WaitS'],
)

const PERSON = object({ sub: str, name: nullable, questions: QUESTIONS, handoffs: HANDOFFS }, [
  'sub',
  'name',
  'questions',
  'handoffs',
])

const TEAM = object(
  { team: str, questions: QUESTIONS, handoffs: HANDOFFS, people: { type: 'array', items: PERSON } },
  ['team', 'questions', 'handoffs', 'people'],
)

/** What `GET api/report` answers (report/stats.ts `Report`). */
const REPORT = object(
  {
    window: { type: 'string', enum: ['24h', '7d'] },
    from: TIME,
    to: TIME,
    bucketS: int,
    all: TEAM,
    teams: { type: 'array', items: TEAM },
    series: {
      type: 'array',
      items: object({ start: TIME, inTime: int, late: int, timeouts: int }, [
        'start',
        'inTime',
        'late',
        'timeouts',
      ]),
    },
    timeouts: {
      type: 'array',
      items: object(
        {
          team: str,
          kasmId: str,
          run: str,
          requestId: str,
          title: str,
          openedAt: TIME,
          closedAt: TIME,
          deadline: { type: ['string', 'null'], format: 'date-time' },
          step: {
            ...int,
            description: 'the last escalation step sent before it timed out (0: the first notice only)',
          },
        },
        ['team', 'kasmId', 'run', 'requestId', 'title', 'openedAt', 'closedAt', 'deadline', 'step'],
      ),
    },
    handoffs: {
      type: 'array',
      items: object(
        {
          team: str,
          kasmId: str,
          run: str,
          reason: str,
          openedAt: TIME,
          closedAt: TIME,
          waitS: { type: 'number' },
          endedBy: { type: 'string', enum: ['operator', 'timeout', 'run_end'] },
          name: nullable,
        },
        ['team', 'kasmId', 'run', 'reason', 'openedAt', 'closedAt', 'waitS', 'endedBy', 'name'],
      ),
    },
  },
  ['window', 'from', 'to', 'bucketS', 'all', 'teams', 'series', 'timeouts', 'handoffs'],
)

const ACTIVITY = object(
  {
    messages: { type: 'array', items: object({ key: str, name: str, at: TIME }, ['key', 'name', 'at']) },
    actions: {
      type: 'array',
      items: object({ key: str, action: str, name: str, at: TIME }, ['key', 'action', 'name', 'at']),
    },
  },
  ['messages', 'actions'],
)

const tags = ['console']
const security = SECURITY

/** The console's API and pages (routes/overview.ts, routes/report.ts, routes/console.ts, pages/plugin.ts). */
export const CONSOLE = {
  overview: {
    tags,
    security,
    summary: 'Every session you may see, as one event stream (`session`, `gone`, `ready` events)',
    response: {
      200: text('text/event-stream', 'server-sent events; counts against GATEWAY_MAX_STREAMS_PER_OPERATOR'),
      ...ERRORS,
    },
  },
  claim: {
    tags,
    security,
    summary: '“I’m on it” on an open question (role operator)',
    response: { 200: { ...NAME_AT, description: 'who holds it, since when' }, ...ERRORS },
  },
  release: {
    tags,
    security,
    summary: 'Give the question back',
    response: { 204: noContent('given back'), ...ERRORS },
  },
  answer: {
    tags,
    security,
    summary: 'Who answered a question through the gateway (from the audit log)',
    response: { 200: NAME_AT, ...ERRORS },
  },
  activity: {
    tags,
    security,
    summary: 'Who sent the run’s messages and took its actions through the gateway',
    response: { 200: ACTIVITY, ...ERRORS },
  },
  report: {
    tags,
    security,
    summary: 'The team report (role operator), of your teams or one',
    response: { 200: REPORT, ...ERRORS },
  },
  reportCsv: {
    tags,
    security,
    summary: 'Every record of the window, one row each (a download)',
    response: { 200: text('text/csv', 'UTF-8 CSV with a header row'), ...ERRORS },
  },
  page: {
    tags,
    summary: 'The console (signed in with a role; a navigation signed out is sent to sign in)',
    response: {
      200: page('the console’s page'),
      303: redirect('to `auth/login?return_to=`'),
      304: noContent('not modified (ETag)'),
      308: redirect('to the base path with its slash'),
      ...ERRORS,
    },
  },
  session: {
    tags,
    summary: 'The console on one session (deep link)',
    params: {
      type: 'object',
      properties: { kasmId: { type: 'string', description: 'the Kasm session id' } },
      required: ['kasmId'],
    },
    response: {
      200: page('the console’s page'),
      303: redirect('to `auth/login?return_to=`'),
      304: noContent('not modified (ETag)'),
      ...ERRORS,
    },
  },
  reportPage: {
    tags,
    summary: 'The team report’s page (operators and admins)',
    response: {
      200: page('the report’s page'),
      303: redirect('to `auth/login?return_to=`'),
      304: noContent('not modified (ETag)'),
      ...ERRORS,
    },
  },
  favicon: {
    tags,
    summary: 'The icon of the console and the pages',
    response: { 200: text('image/x-icon', 'the icon (binary)') },
  },
  sessions: {
    tags,
    summary: 'The list of sessions is the overview',
    response: { 308: redirect('to the base path') },
  },
} as const
