#!/usr/bin/env node
/**
 * `node scripts/cpu-by-process.mjs -- <command ...>`: runs the command and prints the CPU time of it and every
 * process it started (its descendants), by kind (Chromium's by process type, the test runner's processes, gateway children,
 * anything else by name: tsx's esbuild, npm, redis-server), for finding where the suite's CPU goes. Linux only (/proc).
 *
 * `/usr/bin/time` cannot tell: it counts only the processes its command waited for, and most of Chromium's are
 * not. Here /proc is read twice a second; a process that ends between two reads loses at most its last half
 * second, and one that leaves the tree before it is first seen (a daemon that detaches at once) is not counted,
 * so the figures are a little low, never high. Exits with the command's status.
 */
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'

const dash = process.argv.indexOf('--')
const command = dash === -1 ? [] : process.argv.slice(dash + 1)
if (command.length === 0) {
  console.error('usage: node scripts/cpu-by-process.mjs -- <command ...>')
  process.exit(2)
}

/** Clock ticks per second of /proc's times: 100 on every Linux this runs on (USER_HZ). */
const HZ = 100
const uptime = () => Number.parseFloat(readFileSync('/proc/uptime', 'utf8'))

/**
 * What kind of process a command line is: by its program (the line's first word), not anything after it: a test
 * process whose files are named `*.chromium.test.ts` is Node's, not Chromium's.
 */
function kind(cmdline, comm) {
  const program = cmdline.split(' ', 1)[0] ?? ''
  if (/chrom(e|ium)/.test(program)) {
    const type = /--type=(\S+)/.exec(cmdline)?.[1] ?? 'browser'
    const sub = /--utility-sub-type=(\S+)/.exec(cmdline)?.[1]
    return `chromium ${type}${sub === undefined ? '' : ` (${sub})`}`
  }
  if (/\bnode$/.test(program) || comm === 'node') {
    if (/run-tests\.mjs/.test(cmdline)) return 'node: the runner'
    if (/ --test\b/.test(cmdline)) return 'node: test processes'
    if (/src\/server\.ts|dist\/server\.js/.test(cmdline)) return 'node: gateway children'
    return 'node: other'
  }
  return comm
}

const started = uptime()
/** pid -> { kind, ticks }: the last reading of each of the command's processes. */
const seen = new Map()
/** Every process's parent and times, as /proc has them now. */
function processes() {
  const all = new Map()
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      const close = stat.lastIndexOf(')')
      const fields = stat.slice(close + 2).split(' ')
      // Fields 4 (ppid), 14 and 15 (utime, stime), counted from 1 with pid and comm.
      all.set(pid, {
        comm: stat.slice(stat.indexOf('(') + 1, close),
        ppid: fields[1],
        ticks: Number(fields[11]) + Number(fields[12]),
      })
    } catch {
      // Gone between the listing and the read.
    }
  }
  return all
}
/** Reads the command's processes: its own and its descendants' (once seen, a process stays counted). */
function read(root) {
  const all = processes()
  const mine = (pid) => {
    for (let p = pid, hops = 0; p !== undefined && hops < 64; p = all.get(p)?.ppid, hops++)
      if (p === root || (p !== pid && seen.has(p))) return true
    return false
  }
  for (const [pid, { comm, ticks }] of all) {
    const entry = seen.get(pid)
    if (entry) entry.ticks = ticks
    else if (mine(pid)) {
      let cmdline = ''
      try {
        cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ')
      } catch {}
      seen.set(pid, { kind: kind(cmdline, comm), ticks })
    }
  }
}

const child = spawn(command[0], command.slice(1), { stdio: 'inherit' })
const root = String(child.pid)
read(root)
const timer = setInterval(() => read(root), 500)
const status = await new Promise((resolve) => child.once('exit', (code) => resolve(code ?? 1)))
clearInterval(timer)
const wall = uptime() - started

const byKind = new Map()
for (const { kind: k, ticks } of seen.values()) byKind.set(k, (byKind.get(k) ?? 0) + ticks / HZ)
const rows = [...byKind].sort((a, b) => b[1] - a[1])
const total = rows.reduce((sum, [, s]) => sum + s, 0)
console.log(`\nCPU of the command and its processes: ${total.toFixed(0)} s in ${wall.toFixed(0)} s`)
for (const [k, s] of rows.filter(([, s]) => s >= 0.5))
  console.log(`${s.toFixed(1).padStart(8)} s  ${((100 * s) / total).toFixed(0).padStart(3)} %  ${k}`)
process.exit(status)
