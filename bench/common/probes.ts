/**
 * The probes a Node fan-out child under test answers besides its own commands: memory after a full GC, a heap
 * snapshot, a CPU profile and a bare collection (the events bench and bench/events/memory-probe.ts use them).
 */
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector/promises'

/**
 * A full, last-resort collection (what V8 does under memory pressure: it also gives free pages back), so a
 * process's RSS afterwards is its live memory rather than what earlier bursts left reserved.
 */
export function collectAll(): void {
  const gc = (globalThis as { gc?: (options?: object) => void }).gc
  if (gc === undefined) return
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' })
  gc({ type: 'major', execution: 'sync', flavor: 'last-resort' })
}

/** Records a CPU profile of this process for `seconds` and writes it to `path` (open it in DevTools). */
export async function profileFor(seconds: number, path: string): Promise<string> {
  const session = new Session()
  session.connect()
  try {
    await session.post('Profiler.enable')
    await session.post('Profiler.start')
    await new Promise((r) => setTimeout(r, seconds * 1000))
    const { profile } = await session.post('Profiler.stop')
    writeFileSync(path, JSON.stringify(profile))
    return path
  } finally {
    session.disconnect()
  }
}

/** The `mem`, `snapshot`, `profile` and `gc` handlers, to spread into a child's `serve` table. */
export function probeHandlers(): Record<string, (args: unknown) => unknown> {
  return {
    mem: () => {
      collectAll()
      return process.memoryUsage()
    },
    snapshot: async (args) => {
      const { writeHeapSnapshot } = await import('node:v8')
      return writeHeapSnapshot((args as { path: string }).path)
    },
    profile: (args) => {
      const { seconds, path } = args as { seconds: number; path: string }
      return profileFor(seconds, path)
    },
    gc: () => {
      collectAll()
      return null
    },
  }
}
