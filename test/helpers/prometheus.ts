/** One metric family of a Prometheus text exposition, as scraped. */
export interface Family {
  readonly type: string
  readonly help: string
  /** Every sample of the family (`_bucket`, `_sum`, `_count` of a histogram included). */
  readonly samples: Sample[]
}

export interface Sample {
  readonly name: string
  readonly labels: Record<string, string>
  readonly value: number
}

/**
 * Parses the text format (version 0.0.4) that `/metrics` answers: `# HELP`, `# TYPE`, and samples with
 * quoted, escaped label values. Enough for prom-client's output, which is all this reads.
 */
export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>()
  const family = (name: string): Family => {
    let f = families.get(name)
    if (!f) {
      f = { type: 'untyped', help: '', samples: [] }
      families.set(name, f)
    }
    return f
  }
  for (const line of text.split('\n')) {
    if (line === '') continue
    const meta = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line)
    if (meta) {
      const f = family(meta[2]!)
      if (meta[1] === 'TYPE') Object.assign(f, { type: meta[3] })
      else Object.assign(f, { help: meta[3] })
      continue
    }
    if (line.startsWith('#')) continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/.exec(line)
    if (!m) throw new Error(`not an exposition line: ${line}`)
    const name = m[1]!
    const labels: Record<string, string> = {}
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]!] = l[2]!.replace(/\\n/g, '\n').replace(/\\(.)/g, '$1')
    // A histogram's samples carry suffixes; its family (declared by # TYPE above them) does not.
    const stripped = name.replace(/_(bucket|sum|count)$/, '')
    family(families.has(name) || !families.has(stripped) ? name : stripped).samples.push({
      name,
      labels,
      value: Number(m[3]),
    })
  }
  return families
}

/** The value of the sample of `name` whose labels include `labels`; undefined when there is none. */
export function sampleValue(
  families: Map<string, Family>,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  for (const f of families.values())
    for (const s of f.samples)
      if (s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)) return s.value
  return undefined
}
