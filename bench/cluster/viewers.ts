/**
 * Bench child: the cluster bench's viewers (bench/common/viewers.ts). Every delivery is recorded; the
 * orchestrator resets the recording when its measured phase starts.
 */
import { serve } from '../common/ipc.ts'
import { type ConnectArgs, Recording, Viewers } from '../common/viewers.ts'

const recording = new Recording()
const viewers = new Viewers(() => recording)

serve({
  connect: (args) => viewers.connect(args as ConnectArgs),
  reset: () => {
    recording.reset()
    return null
  },
  stats: () => ({ ...recording.summary(), open: viewers.open, ended: viewers.ended }),
  close: () => viewers.close(),
})
