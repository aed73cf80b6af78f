import { readFileSync } from 'node:fs'

const TICKS_PER_S = 100 // USER_HZ on Linux

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // Fields after the command name (which may contain spaces) start at the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const utime = Number(fields[11])
  const stime = Number(fields[12])
  return (utime + stime) / TICKS_PER_S
}

/** Resident memory of a process in bytes, from /proc/<pid>/status. */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const match = /VmRSS:\s+(\d+) kB/.exec(status)
  return match ? Number(match[1]) * 1024 : 0
}

/** Sum over several processes (nginx workers, or nginx plus the runtime). */
export function cpuOf(pids: readonly number[]): number {
  return pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0)
}

export function rssOf(pids: readonly number[]): number {
  return pids.reduce((sum, pid) => sum + rssBytes(pid), 0)
}

/** Time a thread ran and waited for a CPU on a run queue, in seconds, and how many times it was run. */
export interface Scheduled {
  runS: number
  waitS: number
  runs: number
}

/**
 * What the scheduler counted for each process's main thread (the event loop of a Node process, the command
 * loop of Redis), summed: /proc/<pid>/schedstat (ns run, ns waited on a run queue, times run).
 */
export function scheduledOf(pids: readonly number[]): Scheduled {
  const sum: Scheduled = { runS: 0, waitS: 0, runs: 0 }
  for (const pid of pids) {
    const [run, wait, runs] = readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ').map(Number)
    sum.runS += (run ?? 0) / 1e9
    sum.waitS += (wait ?? 0) / 1e9
    sum.runs += runs ?? 0
  }
  return sum
}
