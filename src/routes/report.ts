import type { FastifyInstance, FastifyRequest } from 'fastify'
import { type Operator, seesTeam } from '../auth/operator.ts'
import { BadRequest, ReportWindowInvalid, TeamNotFound } from '../errors.ts'
import { CONSOLE } from '../openapi/routes/console.ts'
import { reportCsv } from '../report/csv.ts'
import { buildReport, isReportWindow, type ReportWindow, WINDOWS } from '../report/stats.ts'
import type { ReportRecord } from '../report/types.ts'
import { teamSchema } from '../sessions/validate.ts'
import { shared } from './overview.ts'

interface ReportRoute {
  Querystring: { window?: string; team?: string }
}

/** The parameters, as strings (a repeated one is refused rather than read as a list). */
const QUERY = {
  querystring: {
    type: 'object',
    properties: {
      window: {
        type: 'string',
        description: '`24h` (the default) or `7d`; anything else is refused with 400 `report_window_invalid`',
      },
      team: { type: 'string', description: 'one of your teams (by default all of them)' },
    },
    additionalProperties: false,
  },
} as const

/** What a report request asks for: the window, and the teams the caller may see (one, or all of theirs). */
interface Scope {
  readonly window: ReportWindow
  readonly teams: readonly string[]
  /** The one team asked for, or null for all of the caller's. */
  readonly team: string | null
}

/**
 * The team report under the base path, for operators and admins (a viewer is refused with 403 `forbidden`,
 * as on every route that needs the operator role), of their teams only:
 * - `GET api/report?window=24h|7d&team=` (JSON, see src/report/stats.ts): questions, answered in time, time to
 *   answer, timeouts, handoffs, per team and per person, and answers per hour (24 h) or per six hours (7 d);
 * - `GET api/report.csv?window=&team=`: every question and handoff of the window, one row each.
 * `window` defaults to 24h (anything else: 400 `report_window_invalid`); a team the caller does not see
 * answers 404 `team_not_found`, like one that does not exist.
 */
export async function reportRoutes(app: FastifyInstance): Promise<void> {
  const scope = async (request: FastifyRequest<ReportRoute>): Promise<Scope> => {
    const operator = request.operator as Operator
    const raw = request.query.window ?? '24h'
    if (!isReportWindow(raw)) throw new ReportWindowInvalid()
    const asked = request.query.team
    if (asked !== undefined) {
      const team = teamSchema.safeParse(asked)
      if (!team.success) throw new BadRequest('team must be a team name')
      if (!seesTeam(operator, team.data)) throw new TeamNotFound()
      return { window: raw, teams: [team.data], team: team.data }
    }
    return { window: raw, teams: await teamsOf(operator), team: null }
  }

  /** The caller's teams: their own, or (`*`) every team with a session or a record. */
  const teamsOf = async (operator: Operator): Promise<string[]> => {
    if (!operator.teams.has('*')) return [...operator.teams].sort()
    const [views, recorded] = await Promise.all([
      app.sessions.list(),
      shared('report records', () => app.teamReport.store.teams()),
    ])
    return [...new Set([...views.map((v) => v.team), ...recorded])].sort()
  }

  /** The window's records, and whether a session is still registered (a removed one's questions never close). */
  const records = async (
    s: Scope,
    now: number,
  ): Promise<{ records: ReportRecord[]; live: (kasmId: string) => boolean }> => {
    const [found, views] = await Promise.all([
      shared('report records', () => app.teamReport.store.list(s.teams, now - WINDOWS[s.window].ms)),
      shared('sessions', () => app.sessions.list()),
    ])
    const registered = new Set(views.map((v) => v.kasmId))
    return { records: found, live: (kasmId) => registered.has(kasmId) }
  }

  app.get<ReportRoute>(
    '/api/report',
    { schema: { ...QUERY, ...CONSOLE.report }, onRequest: app.requireAccess('write') },
    async (request, reply) => {
      const s = await scope(request)
      const now = Date.now()
      reply.header('cache-control', 'no-store')
      const { records: found, live } = await records(s, now)
      return buildReport(s.window, s.teams, found, now, live)
    },
  )

  app.get<ReportRoute>(
    '/api/report.csv',
    { schema: { ...QUERY, ...CONSOLE.reportCsv }, onRequest: app.requireAccess('write') },
    async (request, reply) => {
      const s = await scope(request)
      const now = Date.now()
      const { records: found, live } = await records(s, now)
      const body = reportCsv(found, live)
      const day = new Date(now).toISOString().slice(0, 10)
      const who = s.team === null ? 'all-teams' : s.team.replace(/[^A-Za-z0-9_-]+/g, '_')
      return reply
        .header('content-type', 'text/csv; charset=utf-8')
        .header('content-disposition', `attachment; filename="krg-report-${who}-${s.window}-${day}.csv"`)
        .header('cache-control', 'no-store')
        .header('x-content-type-options', 'nosniff')
        .send(body)
    },
  )
}
