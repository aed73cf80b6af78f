/** Helpers of a bench's orchestrator (its run.ts): options, timing, ports, the machine and the results file. */
import { mkdirSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { cpus, totalmem } from 'node:os'
import { fileURLToPath } from 'node:url'

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

/** A progress line on stdout, tagged `[bench <name>]`. */
export function logger(name: string): (line: string) => void {
  return (line) => process.stdout.write(`[bench ${name}] ${line}\n`)
}

/**
 * The value after each `--flag` of `names` (undefined when it is the last word; the last occurrence wins).
 * Another word is skipped, or refused with `strict`.
 */
export function readFlags(
  argv: string[],
  names: readonly string[],
  strict: boolean,
): Map<string, string | undefined> {
  const flags = new Map<string, string | undefined>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string
    if (names.includes(arg)) {
      flags.set(arg, argv[i + 1])
      i++
    } else if (strict) {
      throw new Error(`unknown option ${arg}`)
    }
  }
  return flags
}

/** A port that was free a moment ago on 127.0.0.1 (for a server that cannot be told to pick its own). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port
      srv.close(() => resolve(port))
    })
  })
}

/** `2 x <cpu model>, 8 GiB`: the machine, for a report's header. */
export function machine(): string {
  return `${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB`
}

/** Writes a report to bench/results/<name>-<date>.md and says where. */
export function writeResult(name: string, date: string, report: string): string {
  const dir = fileURLToPath(new URL('../results/', import.meta.url))
  mkdirSync(dir, { recursive: true })
  const file = `${dir}${name}-${date}.md`
  writeFileSync(file, report)
  return file
}
