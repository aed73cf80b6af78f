/**
 * A probe for a bench child, loaded with `--node-args "--import ./bench/probes/heap-sample.mjs"`: on SIGUSR2
 * it samples the heap for 4 s (V8's sampling heap profiler, one sample per 4 KiB) and writes what is still
 * alive of what was allocated meanwhile, by allocation site, to `$KRG_PROBE_DIR/<pid>.heapprofile` (default
 * the system's temp dir; DevTools opens it). Taken mid-phase, that is what young-generation collections copy
 * and promote: objects that outlive a collection. `node bench/probes/heap-top.mjs <file>` lists the sites.
 */

import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const SAMPLE_S = 4
process.on('SIGUSR2', () => {
  const session = new Session()
  session.connect()
  session.post('HeapProfiler.enable', () =>
    session.post('HeapProfiler.startSampling', { samplingInterval: 4096 }, () =>
      setTimeout(
        () =>
          session.post('HeapProfiler.getSamplingProfile', (err, result) => {
            if (err === null) {
              const file = join(process.env.KRG_PROBE_DIR ?? tmpdir(), `${process.pid}.heapprofile`)
              writeFileSync(file, JSON.stringify(result.profile))
            }
            session.post('HeapProfiler.stopSampling', () => session.disconnect())
          }),
        SAMPLE_S * 1000,
      ),
    ),
  )
})
