/**
 * Bench child: the events bench's viewers (bench/common/viewers.ts). Deliveries are recorded per kind of
 * phase, as the orchestrator names it; outside any phase they are dropped.
 */
import { serve } from '../common/ipc.ts'
import { type ConnectArgs, Recording, Viewers } from '../common/viewers.ts'

const records = new Map<string, Recording>()
let current: Recording | null = null
const viewers = new Viewers(() => current)

serve({
  connect: (args) => viewers.connect(args as ConnectArgs),
  /** Records into `name` from now on (null: record nothing). */
  record: (args) => {
    const { name } = args as { name: string | null }
    if (name === null) {
      current = null
      return null
    }
    let record = records.get(name)
    if (record === undefined) {
      record = new Recording()
      records.set(name, record)
    }
    current = record
    return null
  },
  stats: (args) => {
    const { name } = args as { name: string }
    const record = records.get(name)
    return {
      ...(record?.summary() ?? { deliveries: 0, p50: Number.NaN, p99: Number.NaN, max: Number.NaN }),
      open: viewers.open,
      ended: viewers.ended,
    }
  },
  close: () => viewers.close(),
})
