import { readFile } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import { z } from 'zod'
import { allowedServiceBase } from '../chat/msteams/service-url.ts'
import { ConfigError, type Env } from '../config.ts'
import { readConfigFile } from '../sessions/file.ts'
import { Secret } from '../sessions/secret.ts'
import { formatIssues, teamSchema } from '../sessions/validate.ts'
import type { UrlPolicy } from '../upstream/url-policy.ts'

/**
 * The body a webhook gets: ours (`json`), what Slack-compatible incoming webhooks accept (`slack`), or an
 * Events API v2 event (`pagerduty`: PagerDuty, Opsgenie and other Events-v2 receivers).
 */
export type NotifyFormat = 'json' | 'slack' | 'pagerduty'

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
  /** Seconds after the question opened that it is notified if still open and unclaimed (absent: 0). */
  readonly afterS?: number
  /** `pagerduty`: the Events v2 routing (integration) key, sent in the body; never logged. */
  readonly routingKey?: Secret
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
  /** Seconds after the question opened that it is notified if still open and unclaimed (absent: 0). */
  readonly afterS?: number
}

/** A person of the notify file (`person: <sub>`): a direct message through their linked chat account(s). */
export interface PersonTarget {
  readonly sub: string
  /** `person:<sub>` (each linked account's delivery adds `/<chat>`). */
  readonly label: string
  readonly afterS: number
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
  /** Seconds after the question opened that it is notified if still open and unclaimed (absent: 0). */
  readonly afterS?: number
  /**
   * A person's 1:1 chat with the bot (a `person:` target's linked Teams account): the conversation is made when
   * delivered (`conversation` empty until then; `serviceUrl` empty when no channel of the file names one).
   */
  readonly person?: { readonly tenantId: string; readonly user: string }
}

/** Where each team's notifications go. */
export interface NotifyRoutes {
  /** GATEWAY_NOTIFY_URL: every team without an entry in the notify file. */
  readonly global: readonly NotifyTarget[]
  /** GATEWAY_NOTIFY_FILE: per team, replacing the global targets (an empty list silences the team). */
  readonly teams: ReadonlyMap<string, readonly NotifyTarget[]>
  /** GATEWAY_NOTIFY_FILE's chat channels per team (the Slack app), beside its webhooks. */
  readonly chat?: ReadonlyMap<string, readonly ChatTarget[]>
  /** GATEWAY_NOTIFY_FILE's `person:` targets per team. */
  readonly people?: ReadonlyMap<string, readonly PersonTarget[]>
}

/** The `person:` targets of a session of `team`. */
export function personTargetsFor(routes: NotifyRoutes, team: string): readonly PersonTarget[] {
  return routes.people?.get(team) ?? []
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

/** `after_s` of any target: seconds after the question opened (its escalation step); default 0. */
const afterS = z
  .number({ invalid_type_error: 'must be a whole number of seconds' })
  .int('must be a whole number of seconds')
  .min(0, 'must be 0 or more')
  .max(86_400, 'must be at most 86400 (a day)')
  .optional()

const entrySchema = z
  .object({
    after_s: afterS,
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
    after_s: afterS,
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
    after_s: afterS,
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

const personEntrySchema = z
  .object({
    after_s: afterS,
    person: z
      .string({ invalid_type_error: "must be a person's id (their sign-in's sub)" })
      .min(1, "must be a person's id (their sign-in's sub)")
      .max(256, 'must be at most 256 characters')
      .regex(/^[^\s/]+$/, 'must not hold spaces or slashes'),
  })
  .strict()

/** Where PagerDuty's Events API v2 takes events; Opsgenie and other receivers set their own `url`. */
export const PAGERDUTY_EVENTS_URL = 'https://events.pagerduty.com/v2/enqueue'

const routingKey = z
  .string()
  .min(8, 'must be at least 8 characters')
  .max(256, 'must be at most 256 characters')
  .regex(/^[\x21-\x7e]+$/, 'must be printable characters without spaces')

const pagerEntrySchema = z
  .object({
    after_s: afterS,
    pagerduty: z
      .object({
        /** The integration's routing key; better in a file (`routingKeyFile`) so the notify file holds none. */
        routingKey: routingKey.optional(),
        routingKeyFile: z.string().min(1).optional(),
        url: webhookUrl.optional(),
      })
      .strict()
      .refine(
        (p) => (p.routingKey === undefined) !== (p.routingKeyFile === undefined),
        'set routingKey or routingKeyFile (one of them)',
      ),
  })
  .strict()

/** Reads a secret file named relative to the notify file: its text, or why not (never its content). */
async function readSecretFile(path: string, name: string): Promise<{ value: string } | { problem: string }> {
  const file = resolve(dirname(path), name)
  try {
    return { value: (await readFile(file, 'utf8')).replace(/\r?\n$/, '') }
  } catch (err) {
    return { problem: `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})` }
  }
}

/** A chat channel's `afterS`, only when it has one (a channel without it looks as it always did). */
function stepOf(afterS: number | undefined): { afterS?: number } {
  return afterS === undefined || afterS === 0 ? {} : { afterS }
}

/** Whether a raw entry of the notify file is of the kind keyed `key` (`slack`, `person`, `pagerduty`). */
function isKind(raw: unknown, key: string): boolean {
  return typeof raw === 'object' && raw !== null && Object.hasOwn(raw, key)
}

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
 * format?, secret? | secretFile?} | {slack: {channel}} | {msteams: {conversation, serviceUrl}} | {person:
 * <sub>} | {pagerduty: {routingKey? | routingKeyFile?, url?}}]}}`, each with an optional `after_s` (its
 * escalation step). A target without a format or secret takes GATEWAY_NOTIFY_FORMAT and GATEWAY_NOTIFY_SECRET.
 * Chat channels go into `chat` (a Slack channel needs GATEWAY_SLACK_BOT_TOKEN, a Teams one
 * GATEWAY_TEAMS_APP_ID and a serviceUrl within GATEWAY_TEAMS_SERVICE_URLS), people into `people`; pagers are
 * webhooks of format `pagerduty`. Throws {@link ConfigError} naming the file and every bad entry, never a value.
 */
export async function loadNotifyFile(
  path: string,
  env: Env,
  chat?: Map<string, ChatTarget[]>,
  people?: Map<string, PersonTarget[]>,
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
    const persons: PersonTarget[] = []
    for (const [index, raw] of rawList.entries()) {
      const at = `${where}[${index}]`
      const label = `team:${team.data}#${index}`
      if (isKind(raw, 'msteams')) {
        const entry = teamsEntrySchema.safeParse(raw)
        if (!entry.success) problems.push(`${at}: ${formatIssues(entry.error)}`)
        else if (env.GATEWAY_TEAMS_APP_ID === undefined)
          problems.push(`${at}: a Teams channel needs GATEWAY_TEAMS_APP_ID`)
        else if (
          allowedServiceBase(
            entry.data.msteams.serviceUrl,
            env.GATEWAY_TEAMS_SERVICE_URLS,
            env.NODE_ENV === 'production',
          ) === null
        )
          problems.push(`${at}: msteams.serviceUrl: not within GATEWAY_TEAMS_SERVICE_URLS`)
        else {
          const { conversation, serviceUrl } = entry.data.msteams
          channels.push({
            chat: 'msteams',
            conversation,
            serviceUrl,
            label: `msteams:${conversation}`,
            ...stepOf(entry.data.after_s),
          })
        }
        continue
      }
      if (isKind(raw, 'slack')) {
        const entry = chatEntrySchema.safeParse(raw)
        if (!entry.success) problems.push(`${at}: ${formatIssues(entry.error)}`)
        else if (env.GATEWAY_SLACK_BOT_TOKEN === undefined)
          problems.push(`${at}: a Slack channel needs GATEWAY_SLACK_BOT_TOKEN`)
        else {
          const channel = entry.data.slack.channel
          channels.push({
            chat: 'slack',
            channel,
            label: `slack:${channel}`,
            ...stepOf(entry.data.after_s),
          })
        }
        continue
      }
      if (isKind(raw, 'person')) {
        const entry = personEntrySchema.safeParse(raw)
        if (!entry.success) problems.push(`${at}: ${formatIssues(entry.error)}`)
        else if (persons.some((p) => p.sub === entry.data.person))
          problems.push(`${at}: the same person as an earlier entry`)
        else {
          const sub = entry.data.person
          persons.push({ sub, label: `person:${sub}`, afterS: entry.data.after_s ?? 0 })
        }
        continue
      }
      if (isKind(raw, 'pagerduty')) {
        const entry = pagerEntrySchema.safeParse(raw)
        if (!entry.success) {
          problems.push(`${at}: ${formatIssues(entry.error)}`)
          continue
        }
        let key = entry.data.pagerduty.routingKey
        const keyFile = entry.data.pagerduty.routingKeyFile
        if (keyFile !== undefined) {
          const read = await readSecretFile(path, keyFile)
          const checked = 'value' in read ? routingKey.safeParse(read.value) : null
          if (!('value' in read)) problems.push(`${at}: routingKeyFile: ${read.problem}`)
          else if (!checked?.success)
            problems.push(`${at}: routingKeyFile: ${keyFile} ${formatIssues(checked?.error as z.ZodError)}`)
          else key = read.value
        }
        if (key === undefined) continue
        targets.push({
          url: entry.data.pagerduty.url ?? PAGERDUTY_EVENTS_URL,
          format: 'pagerduty',
          secret: null,
          label,
          afterS: entry.data.after_s ?? 0,
          routingKey: new Secret(key),
        })
        continue
      }
      const entry = entrySchema.safeParse(raw)
      if (!entry.success) {
        problems.push(`${at}: ${formatIssues(entry.error)}`)
        continue
      }
      let secret = entry.data.secret ?? env.GATEWAY_NOTIFY_SECRET
      if (entry.data.secretFile !== undefined) {
        const read = await readSecretFile(path, entry.data.secretFile)
        if (!('value' in read)) {
          problems.push(`${at}: secretFile: ${read.problem}`)
          continue
        }
        secret = read.value
        if (secret.length < 16) {
          problems.push(`${at}: secretFile: ${entry.data.secretFile} must hold at least 16 characters`)
          continue
        }
      }
      targets.push({
        url: entry.data.url,
        format: entry.data.format ?? env.GATEWAY_NOTIFY_FORMAT,
        secret: secret === undefined ? null : new Secret(secret),
        label,
        afterS: entry.data.after_s ?? 0,
      })
    }
    teams.set(team.data, targets)
    chat?.set(team.data, channels)
    people?.set(team.data, persons)
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
    for (const [position, target] of targets.entries()) {
      // A file entry's place in its team's list (chat and person entries sit between webhooks), as its label says.
      const index = Number(/#(\d+)$/.exec(target.label)?.[1] ?? position)
      const refusal = await policy.check(target.url)
      if (refusal !== undefined) problems.push(`${where(index)}: ${refusal.reason}`)
      // Two pagers share Events API's URL: the routing key tells them apart (compared in memory only).
      const same = `${target.url}\u0000${target.routingKey?.reveal() ?? ''}`
      const earlier = first.get(same)
      if (earlier === undefined) first.set(same, index)
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
