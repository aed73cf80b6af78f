// A sidebar written from sidebar-protocol.md, as the runtime's bundled one is described there: it derives its
// base from its own URL, reads ?kasm_runtime_token= and sends it on every request, reads /events with fetch and
// a stream reader (polling every 1.5 s until the first live stream, backing off after a drop), and sends
// messages to the inbox. Behind the gateway the token is a placeholder: the person's cookie is what counts.
import { createParser } from './eventsource-parser.js'

const $ = (id) => document.getElementById(id)
// /desktop/<kasm_id>/vnc/<anything> -> /desktop/<kasm_id>/mcp/
const base = location.pathname.replace(/\/vnc\/.*$/, '/mcp/')
const token = new URLSearchParams(location.search).get('kasm_runtime_token') ?? ''
const credential = token === '' ? {} : { 'X-Kasm-Runtime-Session-Token': token }
let run = null
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function show(type, data) {
  const payload = data[type === 'delivery' ? 'message' : type] ?? {}
  const li = document.createElement('li')
  li.textContent = `${type}: ${payload.msg ?? payload.phase ?? payload.text ?? payload.run_id ?? ''}`
  $('events').append(li)
}

async function follow() {
  let live = false
  let backoff = 1000
  for (;;) {
    let response
    try {
      response = await fetch(`${base}events`, { headers: credential })
    } catch {
      response = null
    }
    if (response === null || response.status !== 200) {
      $('status').textContent = `waiting (${response?.status ?? 'network'})`
      await sleep(live ? backoff : 1500)
      if (live) backoff = Math.min(backoff * 2, 10_000)
      continue
    }
    live = true
    backoff = 1000
    $('status').textContent = 'live'
    const parser = createParser({
      onEvent(event) {
        if (event.id) run = event.id.slice(0, event.id.lastIndexOf(':'))
        if (event.event === 'closed') return
        show(event.event ?? 'message', JSON.parse(event.data))
      },
      onComment(comment) {
        if (comment.startsWith('run ')) run = comment.slice(4)
      },
    })
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ done: true }))
      if (done) break
      parser.feed(value)
    }
    $('status').textContent = 'reconnecting'
    await sleep(backoff)
  }
}

async function send(text) {
  if (run === null) run = (await (await fetch(`${base}inbox`, { headers: credential })).json()).run
  const response = await fetch(`${base}messages`, {
    method: 'POST',
    headers: { ...credential, 'content-type': 'application/json' },
    body: JSON.stringify({ run, key: crypto.randomUUID(), text }),
  })
  $('sent').textContent = response.status === 202 ? 'sent' : `refused (${response.status})`
}

$('compose').addEventListener('submit', (e) => {
  e.preventDefault()
  void send($('text').value)
})
void follow()
