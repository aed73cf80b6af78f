import { parser } from '@prometheus-io/lezer-promql'

/** Grafana's interval variables, which are not PromQL, as a duration the parser accepts. */
const GRAFANA_INTERVALS = /\$__(rate_interval|interval|range)\b/g

/**
 * Checks a PromQL expression with Prometheus' own grammar (the one its UI uses): returns the syntax problems
 * (none for a valid expression) and the metric names it selects.
 */
export function inspectPromql(expr: string): { errors: string[]; metrics: string[] } {
  const text = expr.replace(GRAFANA_INTERVALS, '5m')
  const tree = parser.parse(text)
  const errors: string[] = []
  const metrics = new Set<string>()
  const cursor = tree.cursor()
  do {
    if (cursor.type.isError)
      errors.push(`syntax error at ${cursor.from}: ${text.slice(cursor.from, cursor.from + 20)}`)
    if (cursor.name === 'VectorSelector') {
      const selector = cursor.node
      const name = selector.getChild('Identifier')
      if (name) metrics.add(text.slice(name.from, name.to))
    }
  } while (cursor.next())
  return { errors, metrics: [...metrics] }
}
