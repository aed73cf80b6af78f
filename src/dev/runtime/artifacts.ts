/**
 * The run's output directory, read-only: trace.jsonl, report.json, runtime.log (the log events),
 * screenshots/<file> for every screenshot event, and whatever `putArtifact` placed there.
 */
import type { RuntimeCore } from './core.ts'
import { screenshotPng } from './png.ts'

/** A file to serve. */
export interface Artifact {
  body: Buffer
  contentType: string
  /** Downloads (unknown extensions) are served as attachments. */
  download: boolean
  immutable: boolean
}

const TEXT = 'text/plain; charset=utf-8'
const TYPES: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  json: 'application/json',
  jsonl: TEXT,
  md: TEXT,
  txt: TEXT,
  tail: TEXT,
  log: TEXT,
}

/**
 * The relative path a raw request path names under `artifacts/`, or null for anything that must be 404:
 * empty segments (directories, `//`), dot segments and dotfiles, and anything that only decodes to such a
 * thing (`%2e%2e`, `%2f` hiding a separator, a NUL). Each segment is decoded exactly once.
 */
export function artifactPath(rawTail: string): string | null {
  if (rawTail === '') return null
  const segments: string[] = []
  for (const raw of rawTail.split('/')) {
    let segment: string
    try {
      segment = decodeURIComponent(raw)
    } catch {
      return null
    }
    if (segment === '' || segment.startsWith('.') || /[/\\\0]/.test(segment)) return null
    segments.push(segment)
  }
  return segments.join('/')
}

/**
 * A relative path inside the output directory for `putArtifact`, or null when it would leave it. Dotfiles
 * may be stored (a real output directory can hold them); the route still refuses to serve them.
 */
export function storablePath(path: string): string | null {
  const segments = path.split('/')
  if (
    segments.some(
      (segment) => segment === '' || segment === '.' || segment === '..' || /[\\\0]/.test(segment),
    )
  ) {
    return null
  }
  return segments.join('/')
}

function typeOf(path: string): { contentType: string; download: boolean } {
  const dot = path.lastIndexOf('.')
  const slash = path.lastIndexOf('/')
  const ext = dot > slash ? path.slice(dot + 1).toLowerCase() : ''
  const known = TYPES[ext]
  return known === undefined
    ? { contentType: 'application/octet-stream', download: true }
    : { contentType: known, download: false }
}

/** The artifact at `path` in the current run, or null. */
export function readArtifact(core: RuntimeCore, path: string): Artifact | null {
  const trace = core.current.trace
  let body: Buffer | undefined
  if (path === 'trace.jsonl') body = Buffer.from(trace.lines.map((line) => `${line}\n`).join(''))
  else if (path === 'report.json') body = Buffer.from(`${JSON.stringify(buildReport(core), null, 2)}\n`)
  else if (path === 'runtime.log') {
    body = Buffer.from(trace.logs.map((log) => `${log.ts} ${log.level.toUpperCase()} ${log.msg}\n`).join(''))
  } else if (trace.screenshots.has(path)) body = screenshotPng(path)
  else body = trace.files.get(path)
  if (body === undefined) return null
  return { body, ...typeOf(path), immutable: path.startsWith('screenshots/') }
}

/** report.json as the runtime writes it at the end, built from what the run has done so far. */
export function buildReport(core: RuntimeCore): Record<string, unknown> {
  const run = core.current
  const trace = run.trace
  return {
    schema_version: 1,
    run_id: run.run,
    kasm_id: core.options.kasmId,
    mode: core.options.consumer === 'loop' ? 'run' : 'mcp',
    started_at: trace.startedAt,
    ended_at: trace.endedAt,
    ended: trace.ending,
    status: trace.lastStatus,
    steps: trace.steps,
    screenshots: [...trace.screenshots],
    inbox: {
      consumer: core.options.consumer,
      messages: run.messages,
      requests: [...run.requests.values()],
      actions: run.actions,
    },
  }
}
