import { z } from 'zod'
import { EnvironmentRefused, KasmUserNotConfigured, KasmUserRefused } from '../errors.ts'
import { readConfigFile } from '../sessions/file.ts'
import { kasmUserIdSchema } from '../sessions/validate.ts'
import { refusedEverywhere } from './environment.ts'
import { kasmIdKey } from './ids.ts'

/**
 * Who may launch what for a team (GATEWAY_KASM_TEAMS_FILE, JSON or YAML, reloaded on SIGHUP):
 *
 * ```yaml
 * teams:
 *   blue:
 *     kasmUserId: 3f6c2e0a9b8d4c7e8f1a2b3c4d5e6f70   # blue's sessions run as this Kasm user
 *     userIds: [8d2e5b1c0a9f4e3d2c1b0a9f8e7d6c5b]   # user_id values blue's admins may choose instead
 *     environment: [TARGET_URL, LANG]              # the only variables blue's launches may set
 *   "*":                                          # every team without an entry of its own
 *     environment: [TARGET_URL]
 * ```
 *
 * A team's entry (else the `*` entry, else none) decides alone; entries are not merged. Without `kasmUserId`
 * the team's sessions run as GATEWAY_KASM_USER_ID; with neither, its launches are refused (501). A `user_id` in
 * a launch is taken only when it is the team's own user or listed in `userIds`, however it is spelled (dashes,
 * case): a team admin never gets a desktop, and Kasm's session token in the viewer link, as any other Kasm user.
 * Without `environment` a launch may set any variable but those no launch may ({@link refusedEverywhere}).
 */

/** A variable name as a launch body gives it. */
const ENVIRONMENT_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/

const environmentName = z
  .string({ invalid_type_error: 'must be a string' })
  .regex(ENVIRONMENT_NAME, 'must be an environment variable name')
  .superRefine((name, ctx) => {
    const why = refusedEverywhere(name)
    if (why !== undefined)
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: `${name} ${why}: no launch may set it` })
  })

const teamEntrySchema = z
  .object({
    kasmUserId: kasmUserIdSchema.optional(),
    userIds: z.array(kasmUserIdSchema, { invalid_type_error: 'must be a list' }).max(10_000).optional(),
    environment: z.array(environmentName, { invalid_type_error: 'must be a list' }).max(1000).optional(),
  })
  .strict()

const teamsFileSchema = z
  .object(
    {
      teams: z.record(
        z.string().min(1, 'a team name must not be empty').max(256, 'a team name is at most 256 characters'),
        teamEntrySchema,
        { required_error: 'is required', invalid_type_error: 'must map team names to entries' },
      ),
    },
    { invalid_type_error: 'must be an object with a "teams" map' },
  )
  .strict()

/** One team's rules, as {@link LaunchPolicy} uses them. */
interface TeamRules {
  readonly kasmUserId: string | undefined
  /** The user ids it may choose, by {@link kasmIdKey}, each as the file spells it. */
  readonly userIds: ReadonlyMap<string, string>
  /** The variables its launches may set; undefined: any that no rule refuses. */
  readonly environment: ReadonlySet<string> | undefined
}

/** Who a launch runs as in Kasm and what it may put in the session's environment, per team. */
export class LaunchPolicy {
  readonly #teams: ReadonlyMap<string, TeamRules>
  readonly #defaultUser: string | undefined

  /** `defaultUser`: GATEWAY_KASM_USER_ID. */
  constructor(teams: ReadonlyMap<string, TeamRules>, defaultUser: string | undefined) {
    this.#teams = teams
    this.#defaultUser = defaultUser
  }

  /** How many entries the teams file has (logs). */
  get size(): number {
    return this.#teams.size
  }

  /** Whether a team without an entry of its own has a Kasm user to launch as (else its launches are refused). */
  everyTeamHasUser(): boolean {
    return this.#defaultUser !== undefined || this.#teams.get('*')?.kasmUserId !== undefined
  }

  /**
   * The Kasm user a launch for `team` runs as: `requested` when the team may choose it, else the team's own.
   * Throws KasmUserRefused (403) for any other `requested`, KasmUserNotConfigured (501) when there is none.
   */
  userFor(team: string, requested: string | undefined): string {
    const rules = this.#rules(team)
    const own = rules?.kasmUserId ?? this.#defaultUser
    if (requested === undefined) {
      if (own === undefined) throw new KasmUserNotConfigured(team)
      return own
    }
    const key = kasmIdKey(requested)
    if (own !== undefined && kasmIdKey(own) === key) return own
    const listed = rules?.userIds.get(key)
    if (listed !== undefined) return listed
    throw new KasmUserRefused(
      `team ${team}'s admins may not launch sessions as Kasm user ${requested} (a team's userIds in GATEWAY_KASM_TEAMS_FILE list the ones they may)`,
    )
  }

  /** Throws EnvironmentRefused (400) naming every variable of `environment` a launch for `team` may not set. */
  checkEnvironment(team: string, environment: Readonly<Record<string, string>>): void {
    const allowed = this.#rules(team)?.environment
    const problems: string[] = []
    for (const name of Object.keys(environment)) {
      const why = refusedEverywhere(name)
      if (why !== undefined) problems.push(`${name} ${why}: no launch may set it`)
      else if (allowed !== undefined && !allowed.has(name))
        problems.push(
          `${name} is not one of the variables team ${team}'s launches may set (its environment in GATEWAY_KASM_TEAMS_FILE)`,
        )
    }
    if (problems.length > 0) throw new EnvironmentRefused(problems.join('; '))
  }

  #rules(team: string): TeamRules | undefined {
    return this.#teams.get(team) ?? this.#teams.get('*')
  }
}

/**
 * The policy from GATEWAY_KASM_TEAMS_FILE (none: every team runs as `defaultUser`, chooses no other user and
 * may set any variable no rule refuses). Throws ConfigError naming the file and each bad entry.
 */
export async function loadLaunchPolicy(
  file: string | undefined,
  defaultUser: string | undefined,
): Promise<LaunchPolicy> {
  const teams = new Map<string, TeamRules>()
  if (file !== undefined) {
    const parsed = await readConfigFile('GATEWAY_KASM_TEAMS_FILE', file, teamsFileSchema)
    for (const [team, entry] of Object.entries(parsed.teams)) {
      teams.set(team, {
        kasmUserId: entry.kasmUserId,
        userIds: new Map((entry.userIds ?? []).map((id) => [kasmIdKey(id), id])),
        environment: entry.environment === undefined ? undefined : new Set(entry.environment),
      })
    }
  }
  return new LaunchPolicy(teams, defaultUser)
}
