import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector/promises'

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
