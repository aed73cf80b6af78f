import { readFile } from 'node:fs/promises'
import { dirname, extname, resolve } from 'node:path'
import { parseDocument } from 'yaml'
import type { ZodType, ZodTypeDef } from 'zod'
import { ConfigError } from '../config.ts'
import { Secret } from './secret.ts'
import { KASM_ID } from './types.ts'
import { fileEntrySchema, fileSchema, formatIssues, tokenSchema, upstreamFromTemplate } from './validate.ts'

/** A session as the sessions file declares it, checked and with its upstream and token resolved. */
export interface FileSession {
  readonly kasmId: string
  readonly upstream: string
  readonly team: string
  readonly messagingToken: Secret
}

/** Options for {@link loadSessionsFile}. */
export interface LoadOptions {
  /** GATEWAY_UPSTREAM_TEMPLATE: the upstream of entries that have none. */
  template?: string
}

/**
 * Reads, parses (JSON or YAML) and validates GATEWAY_SESSIONS_FILE as a whole, reading every
 * `messagingTokenFile`. Throws {@link ConfigError} naming the file and each bad entry; on success
 * every entry is valid, so the caller can apply the set without ever half-applying it.
 *
 * Parser messages are not passed on: JSON and YAML errors quote the source, which may hold a token.
 */
export async function loadSessionsFile(path: string, options: LoadOptions = {}): Promise<FileSession[]> {
  const fail = (detail: string): never => {
    throw new ConfigError(`GATEWAY_SESSIONS_FILE (${path}): ${detail}`)
  }
  const top = await readConfigFile('GATEWAY_SESSIONS_FILE', path, fileSchema)

  const problems: string[] = []
  const sessions: FileSession[] = []
  const seen = new Map<string, number>()
  for (const [index, raw] of top.sessions.entries()) {
    const name = entryName(index, raw)
    const entry = fileEntrySchema.safeParse(raw)
    if (!entry.success) {
      problems.push(`${name}: ${formatIssues(entry.error)}`)
      continue
    }
    const { kasmId, team, messagingToken, messagingTokenFile } = entry.data
    const first = seen.get(kasmId)
    if (first !== undefined) {
      problems.push(`${name}: duplicate kasmId, already used by sessions[${first}]`)
      continue
    }
    seen.set(kasmId, index)

    let upstream = entry.data.upstream
    if (upstream === undefined) {
      const built = upstreamFromTemplate(options.template, kasmId)
      if (built === undefined) {
        problems.push(`${name}: upstream: is required (GATEWAY_UPSTREAM_TEMPLATE is not set)`)
        continue
      }
      if (!built.ok) {
        problems.push(`${name}: upstream from GATEWAY_UPSTREAM_TEMPLATE ${built.reason}`)
        continue
      }
      upstream = built.url
    }

    let token = messagingToken
    if (messagingTokenFile !== undefined) {
      const read = await readTokenFile(resolve(dirname(path), messagingTokenFile))
      if (!read.ok) {
        problems.push(`${name}: messagingTokenFile: ${read.reason}`)
        continue
      }
      token = read.token
    }
    // The schema guarantees exactly one of the two, so one of them set `token`.
    sessions.push({ kasmId, upstream, team, messagingToken: new Secret(token ?? '') })
  }
  if (problems.length > 0) return fail(problems.join('; '))
  return sessions
}

/**
 * Reads a deployer's file (the sessions file, the notify file, the Kasm teams file) named by `variable`, parses it (JSON or YAML)
 * and checks its top level against `schema`. Throws {@link ConfigError} `<variable> (<path>): <why>`: the read
 * error's code, the parse error's position, the schema's issues; never the source (it may hold a secret).
 */
export async function readConfigFile<T>(
  variable: string,
  path: string,
  schema: ZodType<T, ZodTypeDef, unknown>,
): Promise<T> {
  const fail = (detail: string): never => {
    throw new ConfigError(`${variable} (${path}): ${detail}`)
  }
  let source: string
  try {
    source = await readFile(path, 'utf8')
  } catch (err) {
    return fail(`cannot read the file (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
  const document = parse(path, source)
  if (!document.ok) return fail(document.reason)
  const top = schema.safeParse(document.value)
  if (!top.success) return fail(formatIssues(top.error))
  return top.data
}

/** `sessions[2] (kasmId "k3")`; the id is quoted only when it is a valid one (never arbitrary input). */
function entryName(index: number, raw: unknown): string {
  const id = typeof raw === 'object' && raw !== null ? (raw as { kasmId?: unknown }).kasmId : undefined
  return typeof id === 'string' && KASM_ID.test(id)
    ? `sessions[${index}] (kasmId "${id}")`
    : `sessions[${index}]`
}

type Parsed = { ok: true; value: unknown } | { ok: false; reason: string }

/** JSON by extension, YAML by extension, otherwise by content (a document starting with `{` is JSON). */
function parse(path: string, source: string): Parsed {
  const ext = extname(path).toLowerCase()
  const json = ext === '.json' || (ext !== '.yaml' && ext !== '.yml' && source.trimStart().startsWith('{'))
  if (json) {
    try {
      return { ok: true, value: JSON.parse(source) }
    } catch (err) {
      const position = /at position (\d+)/.exec((err as Error).message)?.[1]
      return {
        ok: false,
        reason: `invalid JSON${position ? ` ${lineColumn(source, Number(position))}` : ''}`,
      }
    }
  }
  const doc = parseDocument(source, { uniqueKeys: true, prettyErrors: false })
  const error = doc.errors[0]
  if (error) return { ok: false, reason: `invalid YAML (${error.code}) ${lineColumn(source, error.pos[0])}` }
  return { ok: true, value: doc.toJS({ maxAliasCount: 100 }) }
}

function lineColumn(source: string, offset: number): string {
  const before = source.slice(0, offset).split('\n')
  return `at line ${before.length}, column ${(before.at(-1)?.length ?? 0) + 1}`
}

async function readTokenFile(
  file: string,
): Promise<{ ok: true; token: string } | { ok: false; reason: string }> {
  let content: string
  try {
    content = await readFile(file, 'utf8')
  } catch (err) {
    return { ok: false, reason: `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})` }
  }
  const token = tokenSchema.safeParse(content.trim())
  if (!token.success) return { ok: false, reason: `content of ${file} ${formatIssues(token.error)}` }
  return { ok: true, token: token.data }
}
