/**
 * The report's chart: answers over time as stacked bars (answered in time, answered late, timed out), drawn
 * as SVG with DOM calls only (no chart library, no markup parsed: the page's CSP allows neither inline style
 * nor HTML sinks). Colours come from the stylesheet's classes, so light and dark follow the theme. The chart
 * is an image with a text alternative; the same numbers are in a table under it.
 */

import type { SeriesBucket } from '../../../report/stats.ts'

const SVG = 'http://www.w3.org/2000/svg'
const HEIGHT = 200
const LEFT = 34
const BOTTOM = 24
const TOP = 8

type Part = { readonly key: 'inTime' | 'late' | 'timeouts'; readonly label: string; readonly cls: string }

/** The stacked parts, bottom first, with the words the legend and the table use. */
export const PARTS: readonly Part[] = [
  { key: 'inTime', label: 'Answered in time', cls: 'bar-in-time' },
  { key: 'late', label: 'Answered late', cls: 'bar-late' },
  { key: 'timeouts', label: 'Timed out', cls: 'bar-timeout' },
]

/** An SVG element with its attributes (and text), through DOM calls only. */
export function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number>,
  text?: string,
): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG, tag)
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value))
  if (text !== undefined) el.textContent = text
  return el
}

/** A bucket's time in full (the tooltip, the table): weekday, day and hour. */
export function bucketLabel(iso: string): string {
  const d = new Date(iso)
  return `${d.toLocaleDateString([], { weekday: 'short', day: 'numeric' })}, ${d.toLocaleTimeString([], { hour: 'numeric', minute: '2-digit' })}`
}

/**
 * The axis's label under bucket `i`, or null: on a week's chart each day where it starts (its weekday too when
 * a day has room), on a day's chart the hour of every `every`th bucket (as many as fit).
 */
function axisLabel(iso: string, i: number, bucketS: number, every: number, slot: number): string | null {
  const d = new Date(iso)
  if (bucketS < 6 * 3600) return i % every === 0 ? d.toLocaleTimeString([], { hour: 'numeric' }) : null
  if (d.getHours() >= bucketS / 3600) return null
  const room = slot * (86_400 / bucketS)
  return room >= 64 ? d.toLocaleDateString([], { weekday: 'short', day: 'numeric' }) : String(d.getDate())
}

/** A few round steps from 0 to at least `max`. */
function ticks(max: number): number[] {
  if (max <= 4) return Array.from({ length: Math.max(1, max) + 1 }, (_, i) => i)
  const step = Math.ceil(max / 4)
  return [0, step, 2 * step, 3 * step, 4 * step]
}

/** Draws `series` into an SVG `width` pixels wide (hidden from assistive technology: the table says it). */
export function drawChart(series: readonly SeriesBucket[], bucketS: number, width: number): SVGSVGElement {
  const total = (b: SeriesBucket) => b.inTime + b.late + b.timeouts
  const top = ticks(Math.max(0, ...series.map(total)))
  const max = top.at(-1) ?? 1
  // Room on the right for the last label's half.
  const plotW = Math.max(60, width - LEFT - 16)
  const plotH = HEIGHT - TOP - BOTTOM
  const y = (n: number) => TOP + plotH - (n / max) * plotH
  const slot = plotW / Math.max(1, series.length)
  const barW = Math.max(2, Math.min(28, slot * 0.7))
  const root = svg('svg', {
    class: 'chart',
    width,
    height: HEIGHT,
    viewBox: `0 0 ${width} ${HEIGHT}`,
    'aria-hidden': 'true',
    focusable: 'false',
  })
  for (const n of top) {
    root.append(svg('line', { class: 'grid', x1: LEFT, x2: LEFT + plotW, y1: y(n), y2: y(n) }))
    root.append(svg('text', { class: 'axis', x: LEFT - 6, y: y(n) + 4, 'text-anchor': 'end' }, String(n)))
  }
  // Hours where they fit: a label at most every 48 px.
  const every = Math.max(1, Math.ceil(48 / slot))
  series.forEach((bucket, i) => {
    const x = LEFT + i * slot + (slot - barW) / 2
    const group = svg('g', { class: 'bucket' })
    group.append(
      svg(
        'title',
        {},
        `${bucketLabel(bucket.start)}: ${PARTS.map((p) => `${bucket[p.key]} ${p.label.toLowerCase()}`).join(', ')}`,
      ),
    )
    let base = 0
    for (const part of PARTS) {
      const n = bucket[part.key]
      if (n === 0) continue
      group.append(
        svg('rect', {
          class: part.cls,
          x,
          y: y(base + n),
          width: barW,
          height: Math.max(1, y(base) - y(base + n)),
          rx: 2,
        }),
      )
      base += n
    }
    root.append(group)
    const label = axisLabel(bucket.start, i, bucketS, every, slot)
    // A day's name starts where the day does; an hour sits under its bar.
    const day = bucketS >= 6 * 3600
    if (label !== null)
      root.append(
        svg(
          'text',
          {
            class: 'axis',
            x: LEFT + i * slot + (day ? 0 : slot / 2),
            y: HEIGHT - 6,
            'text-anchor': day ? 'start' : 'middle',
          },
          label,
        ),
      )
  })
  root.append(svg('line', { class: 'baseline', x1: LEFT, x2: LEFT + plotW, y1: y(0), y2: y(0) }))
  return root
}
