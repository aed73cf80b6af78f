import { readFile } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import { z } from 'zod'
import { allowedServiceBase } from '../chat/msteams/service-url.ts'
import { ConfigError, type Env } from '../config.ts'
import { readConfigFile } from '../sessions/file.ts'
import { Secret } from '../sessions/secret.ts'
import { formatIssues, teamSchema } from '../sessions/validate.ts'
import type { UrlPolicy } from '../upstream/url-policy.ts'

/** The body a webhook gets: ours (`json`), or what Slack-compatible incoming webhooks accept (`slack`). */
export type NotifyFormat = 'json' | 'slack'

/** One webhook. */
export interface NotifyTarget {
  readonly url: string
  readonly format: NotifyFormat
  /** The HMAC key of `X-Krg-Signature`; null: unsigned. */
  readonly secret: Secret | null
  /**
   * A name for metrics, the admin API and the delivery ledger, unique among the targets: `<host>#<index>` for
   * the URLs of GATEWAY_NOTIFY_URL (two Slack channels are two URLs on one host), `team:<name>#<index>` for the
   * notify file's. Never a URL path (a Slack webhook's path is its key) nor a session id.
   */
  readonly label: string
}

/** A chat channel of the notify file: a Slack channel or a Teams conversation. */
export type ChatTarget = SlackChatTarget | TeamsChatTarget

/** A Slack channel of the notify file (`{slack: {channel}}`), where the Slack app posts and is answered. */
export interface SlackChatTarget {
  readonly chat: 'slack'
  /** The channel's id (Slack: `C…` or `G…`). */
  readonly channel: string
  /** A stable name for metrics, the delivery ledger and the admin API: `slack:<channel>`. */
  readonly label: string
}

/** A Teams conversation of the notify file (`{msteams: {conversation, serviceUrl}}`), where the Teams bot posts. */
export interface TeamsChatTarget {
  readonly chat: 'msteams'
  /** The channel's (or group chat's) conversation id, `19:…@thread.tacv2`. */
  readonly conversation: string
  /** The connector's address for it, within GATEWAY_TEAMS_SERVICE_URLS. */
  readonly serviceUrl: string
  /** A stable name for metrics, the delivery ledger and the admin API: `msteams:<conversation>`. */
  readonly label: string
}

/** Where each team's notifications go. */
export interface NotifyRoutes {
  /** GATEWAY_NOTIFY_URL: every team without an entry in the notify file. */
  readonly global: readonly NotifyTarget[]
  /** GATEWAY_NOTIFY_FILE: per team, replacing the global targets (an empty list silences the team). */
  readonly teams: ReadonlyMap<string, readonly NotifyTarget[]>
  /** GATEWAY_NOTIFY_FILE's chat channels per team (the Slack app), beside its webhooks. */
  readonly chat?: ReadonlyMap<string, readonly ChatTarget[]>
}

/** The chat channels of a session of `team`. */
export function chatTargetsFor(routes: NotifyRoutes, team: string): readonly ChatTarget[] {
  return routes.chat?.get(team) ?? []
}

/** The targets of a session of `team` (none: the session is not watched for notifications). */
export function targetsFor(routes: NotifyRoutes, team: string): readonly NotifyTarget[] {
  return routes.teams.get(team) ?? routes.global
}

/** Every target, each once (metrics, the boot check). */
export function allTargets(routes: NotifyRoutes): NotifyTarget[] {
  return [...routes.global, ...[...routes.teams.values()].flat()]
}

/** The global targets of GATEWAY_NOTIFY_URL, GATEWAY_NOTIFY_FORMAT and GATEWAY_NOTIFY_SECRET. */
export function globalTargets(env: Env): NotifyTarget[] {
  const secret = env.GATEWAY_NOTIFY_SECRET === undefined ? null : new Secret(env.GATEWAY_NOTIFY_SECRET)
  return env.GATEWAY_NOTIFY_URL.map((url, index) => ({
    url,
    format: env.GATEWAY_NOTIFY_FORMAT,
    secret,
    label: `${new URL(url).host}#${index}`,
  }))
}

const webhookUrl = z
  .string({ required_error: 'is required', invalid_type_error: 'must be a string' })
  .url('must be an absolute http(s) URL')
  .regex(/^https?:\/\//, 'must be an http(s) URL')

const entrySchema = z
  .object({
    url: webhookUrl,
    format: z.enum(['json', 'slack']).optional(),
    secret: z.string().min(16, 'must be at least 16 characters').optional(),
    /** A file holding the secret (relative to the notify file), so the file itself holds none. */
    secretFile: z.string().min(1).optional(),
  })
  .strict()
  .refine((e) => e.secret === undefined || e.secretFile === undefined, 'set secret or secretFile, not both')

const chatEntrySchema = z
  .object({
    slack: z
      .object({
        channel: z
          .string({ required_error: 'is required', invalid_type_error: 'must be a string' })
          .regex(/^[CG][A-Z0-9]{6,20}$/, 'must be a channel id such as C0123ABCD (not its name)'),
      })
      .strict(),
  })
  .strict()

const teamsEntrySchema = z
  .object({
    msteams: z
      .object({
        conversation: z
          .string({ required_error: 'is required', invalid_type_error: 'must be a string' })
          .regex(
            /^19:[^\s;"'<>]{1,400}$/,
            "must be a channel's conversation id such as 19:…@thread.tacv2 (without ;messageid=…)",
          ),
        serviceUrl: z
          .string({ required_error: 'is required', invalid_type_error: 'must be a string' })
          .url('must be the connector URL the bot gave (e.g. https://smba.trafficmanager.net/amer/)'),
      })
      .strict(),
  })
  .strict()

const fileSchema = z
  .object(
    {
      teams: z.record(z.unknown(), {
        required_error: 'is required',
        invalid_type_error: 'must be an object of team name -> list of targets',
      }),
    },
    { invalid_type_error: 'must be an object with "teams"' },
  )
  .strict()

/**
 * Reads and validates GATEWAY_NOTIFY_FILE (JSON or YAML, as the sessions file): `{teams: {<team>: [{url,
 * format?, secret? | secretFile?} | {slack: {channel}} | {msteams: {conversation, serviceUrl}}]}}`. A target without a format or secret takes
 * GATEWAY_NOTIFY_FORMAT and GATEWAY_NOTIFY_SECRET. Chat channels go into `chat` (a Slack channel needs
 * GATEWAY_SLACK_BOT_TOKEN, a Teams one GATEWAY_TEAMS_APP_ID and a serviceUrl within GATEWAY_TEAMS_SERVICE_URLS).
 * Throws {@link ConfigError} naming the file and every bad entry, never a value.
 */
export async function loadNotifyFile(
  path: string,
  env: Env,
  chat?: Map<string, ChatTarget[]>,
): Promise<Map<string, NotifyTarget[]>> {
  const fail = (detail: string): never => {
    throw new ConfigError(`GATEWAY_NOTIFY_FILE (${path}): ${detail}`)
  }
  const top = await readConfigFile('GATEWAY_NOTIFY_FILE', path, fileSchema)

  const problems: string[] = []
  const teams = new Map<string, NotifyTarget[]>()
  for (const [rawTeam, rawList] of Object.entries(top.teams)) {
    const team = teamSchema.safeParse(rawTeam)
    const where = `teams.${JSON.stringify(rawTeam.slice(0, 64))}`
    if (!team.success) {
      problems.push(`${where}: team name ${formatIssues(team.error)}`)
      continue
    }
    if (!Array.isArray(rawList)) {
      problems.push(`${where}: must be a list of targets`)
      continue
    }
    const targets: NotifyTarget[] = []
    const channels: ChatTarget[] = []
    for (const [index, raw] of rawList.entries()) {
      if (typeof raw === 'object' && raw !== null && Object.hasOwn(raw, 'msteams')) {
        const entry = teamsEntrySchema.safeParse(raw)
        if (!entry.success) problems.push(`${where}[${index}]: ${formatIssues(entry.error)}`)
        else if (env.GATEWAY_TEAMS_APP_ID === undefined)
          problems.push(`${where}[${index}]: a Teams channel needs GATEWAY_TEAMS_APP_ID`)
        else if (
          allowedServiceBase(
            entry.data.msteams.serviceUrl,
            env.GATEWAY_TEAMS_SERVICE_URLS,
            env.NODE_ENV === 'production',
          ) === null
        )
          problems.push(`${where}[${index}]: msteams.serviceUrl: not within GATEWAY_TEAMS_SERVICE_URLS`)
        else {
          const { conversation, serviceUrl } = entry.data.msteams
          channels.push({ chat: 'msteams', conversation, serviceUrl, label: `msteams:${conversation}` })
        }
        continue
      }
      if (typeof raw === 'object' && raw !== null && Object.hasOwn(raw, 'slack')) {
        const entry = chatEntrySchema.safeParse(raw)
        if (!entry.success) problems.push(`${where}[${index}]: ${formatIssues(entry.error)}`)
        else if (env.GATEWAY_SLACK_BOT_TOKEN === undefined)
          problems.push(`${where}[${index}]: a Slack channel needs GATEWAY_SLACK_BOT_TOKEN`)
        else {
          const channel = entry.data.slack.channel
          channels.push({ chat: 'slack', channel, label: `slack:${channel}` })
        }
        continue
      }
      const entry = entrySchema.safeParse(raw)
      if (!entry.success) {
        problems.push(`${where}[${index}]: ${formatIssues(entry.error)}`)
        continue
      }
      let secret = entry.data.secret ?? env.GATEWAY_NOTIFY_SECRET
      if (entry.data.secretFile !== undefined) {
        const file = resolve(dirname(path), entry.data.secretFile)
        try {
          secret = (await readFile(file, 'utf8')).replace(/\r?\n$/, '')
        } catch (err) {
          problems.push(
            `${where}[${index}]: secretFile: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
          )
          continue
        }
        if (secret.length < 16) {
          problems.push(`${where}[${index}]: secretFile: ${file} must hold at least 16 characters`)
          continue
        }
      }
      targets.push({
        url: entry.data.url,
        format: entry.data.format ?? env.GATEWAY_NOTIFY_FORMAT,
        secret: secret === undefined ? null : new Secret(secret),
        label: `team:${team.data}#${index}`,
      })
    }
    teams.set(team.data, targets)
    chat?.set(team.data, channels)
  }
  if (problems.length > 0) return fail(problems.join('; '))
  return teams
}

/**
 * Applies the URL policy (GATEWAY_UPSTREAM_ALLOW and the default refusals) to every target: a webhook is a
 * request the gateway makes on behalf of whoever wrote the URL. A URL listed twice for the same teams would
 * get every notification twice under two delivery ids: refused too. Throws {@link ConfigError} naming the
 * variable or the file entry of each refused URL, never the URL (its path may be a key).
 */
export async function checkTargets(policy: UrlPolicy, routes: NotifyRoutes, file?: string): Promise<void> {
  const problems: string[] = []
  const check = async (targets: readonly NotifyTarget[], where: (index: number) => string): Promise<void> => {
    const first = new Map<string, number>()
    for (const [index, target] of targets.entries()) {
      const refusal = await policy.check(target.url)
      if (refusal !== undefined) problems.push(`${where(index)}: ${refusal.reason}`)
      const earlier = first.get(target.url)
      if (earlier === undefined) first.set(target.url, index)
      else problems.push(`${where(index)}: the same URL as [${earlier}]`)
    }
  }
  await check(routes.global, (index) => `GATEWAY_NOTIFY_URL[${index}]`)
  for (const [team, targets] of routes.teams)
    await check(
      targets,
      (index) => `GATEWAY_NOTIFY_FILE (${file}): teams.${JSON.stringify(team)}[${index}].url`,
    )
  if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`)
}
