/** What the soak judges a run by: each viewer's ids, and the witness replica's heap. */

import { contiguity } from '../cluster/cluster-harness.ts'

/** Heap samples before this are warm-up (JIT, caches, first connections) and not compared. */
const WARMUP_MS = 10_000
/** The heap floor of the last quarter may exceed the first half's by this factor plus {@link HEAP_SLACK}. */
const HEAP_GROWTH = 1.5
const HEAP_SLACK = 8 * 1024 * 1024

export const runOf = (id: string): string => id.slice(0, id.lastIndexOf(':'))
export const seqOf = (id: string): number => Number(id.slice(id.lastIndexOf(':') + 1))

/**
 * One viewer's ids, run by run in arrival order: no run comes back once another followed it; within a run
 * no duplicate, no reorder, and no hole from its first event (a viewer away when a new run started may lack
 * the old run's tail: the protocol then serves the new run from its start); the last run, the sentinel's,
 * is whole up to the sentinel.
 */
export function runVerdict(ids: readonly string[], sentinel: string): string {
  const runs: { run: string; seqs: number[] }[] = []
  for (const id of ids) {
    const run = runOf(id)
    if (runs.at(-1)?.run !== run) {
      if (runs.some((r) => r.run === run)) return `run ${run} came back after another`
      runs.push({ run, seqs: [] })
    }
    runs.at(-1)?.seqs.push(seqOf(id))
  }
  const problems: string[] = []
  runs.forEach(({ run, seqs }, i) => {
    const last = i === runs.length - 1 && run === runOf(sentinel) ? seqOf(sentinel) : Math.max(...seqs)
    const verdict = contiguity(seqs, 1, last)
    if (verdict !== 'ok') problems.push(`${run}: ${verdict}`)
  })
  if (runOf(ids.at(-1) ?? '') !== runOf(sentinel)) problems.push(`ended in another run than ${sentinel}`)
  return problems.length === 0 ? 'ok' : problems.join('; ')
}

export interface HeapSample {
  at: number
  bytes: number
}

/** `nodejs_heap_size_used_bytes` from a replica's /metrics, or null when it does not answer within 1 s. */
export async function heapUsed(url: string): Promise<number | null> {
  try {
    const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(1000) })
    const m = /^nodejs_heap_size_used_bytes (\S+)/m.exec(await res.text())
    return m ? Number(m[1]) : null
  } catch {
    return null
  }
}

/**
 * Whether the witness's heap keeps growing: the floor (lowest sample, i.e. after a collection) of the last
 * quarter against the floor of the first half, warm-up left out. Needs 40 s of samples; a shorter run says so.
 */
export function heapVerdict(samples: readonly HeapSample[]): { summary: string; failure: string | null } {
  const start = samples[0]?.at
  const kept = start === undefined ? [] : samples.filter((s) => s.at - start >= WARMUP_MS)
  const span = kept.length < 2 ? 0 : (kept.at(-1) as HeapSample).at - (kept[0] as HeapSample).at
  if (span < 40_000)
    return { summary: `${samples.length} samples, too short a run to judge growth`, failure: null }
  const t0 = (kept[0] as HeapSample).at
  const floor = (from: number, to: number): number =>
    Math.min(...kept.filter((s) => s.at - t0 >= from * span && s.at - t0 <= to * span).map((s) => s.bytes))
  const early = floor(0, 0.5)
  const late = floor(0.75, 1)
  const mib = (b: number): string => `${(b / 1024 / 1024).toFixed(1)} MiB`
  const summary = `${kept.length} samples over ${Math.round(span / 1000)} s; floor ${mib(early)} (first half), ${mib(late)} (last quarter)`
  const failure =
    late > early * HEAP_GROWTH + HEAP_SLACK ? `witness replica heap kept growing: ${summary}` : null
  return { summary, failure }
}
