/**
 * A node:test reporter that adds up each test file's time and prints the slowest files, for finding where the
 * suite spends its minutes. Use it beside the usual reporter:
 *
 *   node --import tsx --test --test-reporter=tap --test-reporter-destination=stdout \
 *     --test-reporter=./scripts/test-times.mjs --test-reporter-destination=/tmp/test-times.txt $(find test -name '*.test.ts')
 *
 * A file's time is the sum of its top-level tests' durations (they run one after another within a file), so it
 * is the time that file holds one of the runner's concurrent slots.
 */
export default async function* testTimes(source) {
  const byFile = new Map()
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue
    const { data } = event
    if (data.nesting !== 0 || typeof data.file !== 'string') continue
    const ms = data.details?.duration_ms ?? 0
    const entry = byFile.get(data.file) ?? { ms: 0, tests: 0, failed: 0 }
    entry.ms += ms
    entry.tests += 1
    if (event.type === 'test:fail') entry.failed += 1
    byFile.set(data.file, entry)
  }
  const rows = [...byFile.entries()].sort((a, b) => b[1].ms - a[1].ms)
  const total = rows.reduce((sum, [, e]) => sum + e.ms, 0)
  yield `${rows.length} files, ${(total / 1000).toFixed(0)} s of file time in all\n`
  for (const [file, e] of rows) {
    const name = file.replace(`${process.cwd()}/`, '')
    yield `${(e.ms / 1000).toFixed(1).padStart(7)} s  ${String(e.tests).padStart(3)} tests${e.failed ? ` (${e.failed} failed)` : ''}  ${name}\n`
  }
}
