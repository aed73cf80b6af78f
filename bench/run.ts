/**
 * `npm run bench -- <name> [options]`: runs one benchmark. Each lives in its own folder and exports
 * `main(argv)`; this file only dispatches.
 */
const benches: Record<string, () => Promise<{ main(argv: string[]): Promise<void> }>> = {
  events: () => import('./events/run.ts'),
  cluster: () => import('./cluster/run.ts'),
  console: () => import('./console/run.ts'),
  proxy: () => import('./proxy/run.ts'),
}

const [name = 'events', ...rest] = process.argv.slice(2)
// A bench starts servers and may install what it compares against: asking for help must start nothing.
if (name === '--help' || name === '-h' || rest.includes('--help') || rest.includes('-h')) {
  process.stdout.write(
    `npm run bench -- <${Object.keys(benches).join('|')}> [options]\n` +
      'Each bench, its options, what it measures and its newest figures: bench/README.md.\n',
  )
  process.exit(0)
}
const load = benches[name]
if (load === undefined) {
  process.stderr.write(`unknown bench "${name}"; one of: ${Object.keys(benches).join(', ')}\n`)
  process.exit(2)
}
await (await load()).main(rest)
