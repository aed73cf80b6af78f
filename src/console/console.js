// The gateway's own console: a minimal sidebar over the same v1 routes, authenticated by the session cookie.
// Every string from the runtime is written with textContent: nothing it sends can run script here.
const $ = (id) => document.getElementById(id)
let current = null
let source = null
let run = null
// The console is served under GATEWAY_BASE_PATH; its script sits at <base>console/console.js.
const base = new URL('../', import.meta.url).pathname

async function api(path, init = {}) {
  const res = await fetch(path, { credentials: 'same-origin', ...init })
  const body = res.headers.get('content-type')?.includes('json') ? await res.json() : null
  if (!res.ok) throw Object.assign(new Error(body?.message ?? res.statusText), { status: res.status, body })
  return body
}

function item(list, text) {
  const li = document.createElement('li')
  li.textContent = text
  list.append(li)
  return li
}

function describe(type, data) {
  const p = data[type === 'delivery' ? 'message' : type] ?? {}
  switch (type) {
    case 'step':
      return `step ${p.n ?? ''} ${p.action ?? ''} ${p.result ?? ''}`
    case 'status':
      return `status ${p.phase ?? ''} ${p.detail ?? ''}`
    case 'log':
      return `log ${p.level ?? ''} ${p.msg ?? ''}`
    case 'message':
    case 'delivery':
      return `${type} ${p.id ?? ''} ${p.state ?? ''} ${p.text ?? ''}`
    case 'request':
      return `request ${p.request_id ?? ''} ${p.state ?? ''} ${p.title ?? ''}`
    case 'info':
      return `info ${p.goal ?? p.app ?? ''}`
    default:
      return type
  }
}

async function refreshInbox() {
  const inbox = await api(`${current}inbox`)
  run = inbox.run
  $('run').textContent = `run ${inbox.run} · rev ${inbox.rev}${inbox.stopping ? ' · stopping…' : ''}`
  const box = $('requests')
  box.replaceChildren()
  for (const id of inbox.open_requests ?? []) {
    const req = await api(`${current}requests/${encodeURIComponent(id)}`)
    box.append(requestForm(req))
  }
}

function requestForm(req) {
  const form = document.createElement('form')
  const set = document.createElement('fieldset')
  const legend = document.createElement('legend')
  legend.textContent = req.title
  set.append(legend)
  const inputs = {}
  let rich = false
  for (const f of req.fields ?? []) {
    const label = document.createElement('label')
    label.textContent = `${f.label ?? f.id} `
    let input
    if (f.type === 'boolean') {
      input = Object.assign(document.createElement('input'), { type: 'checkbox' })
    } else if (f.type === 'string' && Array.isArray(f.enum)) {
      input = document.createElement('select')
      for (const v of f.enum)
        input.append(Object.assign(document.createElement('option'), { value: v, textContent: v }))
    } else if (f.type === 'string' || f.type === 'integer' || f.type === 'number') {
      input = Object.assign(document.createElement('input'), {
        type: f.type === 'string' ? 'text' : 'number',
      })
    } else {
      rich = true
      continue
    }
    inputs[f.id] = { input, type: f.type }
    label.append(input)
    set.append(label, document.createElement('br'))
  }
  if (rich)
    set.append(Object.assign(document.createElement('p'), { textContent: 'This request needs a richer UI' }))
  const button = Object.assign(document.createElement('button'), { type: 'submit', textContent: 'Answer' })
  set.append(button)
  form.append(set)
  form.addEventListener('submit', async (e) => {
    e.preventDefault()
    const values = {}
    for (const [id, { input, type }] of Object.entries(inputs)) {
      values[id] = type === 'boolean' ? input.checked : type === 'string' ? input.value : Number(input.value)
    }
    await send({ reply_to: req.request_id, revision: req.revision, values })
  })
  return form
}

async function send(fields) {
  try {
    const body = { run, key: crypto.randomUUID(), ...fields }
    const res = await api(`${current}messages`, post(body))
    $('status').textContent = `sent: ${res.state ?? 'stored'}`
    await refreshInbox()
  } catch (err) {
    $('status').textContent = `refused: ${err.message}`
  }
}

async function action(name) {
  try {
    await api(`${current}actions`, post({ run, key: crypto.randomUUID(), action: name }))
    $('status').textContent = `${name}: accepted`
  } catch (err) {
    $('status').textContent = `${name} refused: ${err.message}`
  }
}

function post(body) {
  return { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }
}

function open(kasmId) {
  source?.close()
  current = `/desktop/${encodeURIComponent(kasmId)}/mcp/`
  $('session').hidden = false
  $('title').textContent = kasmId
  $('timeline').replaceChildren()
  for (const li of $('sessions').children) li.setAttribute('aria-current', String(li.dataset.id === kasmId))
  source = new EventSource(`${current}events`)
  source.onmessage = null
  const onEvent = (e) => {
    const data = JSON.parse(e.data)
    const li = item($('timeline'), `${data.seq ?? ''} ${describe(e.type, data)}`)
    const file = e.type === 'screenshot' ? data.screenshot?.file : undefined
    if (typeof file === 'string') {
      // Served by the gateway with the cookie; the path is the runtime's, encoded segment by segment.
      const src = `${current}artifacts/${file.split('/').map(encodeURIComponent).join('/')}`
      li.append(
        Object.assign(document.createElement('img'), { src, alt: data.screenshot.label ?? file, width: 160 }),
      )
    }
    li.scrollIntoView({ block: 'nearest' })
    if (e.type === 'request' || e.type === 'info' || e.type === 'delivery') void refreshInbox()
  }
  for (const t of [
    'info',
    'status',
    'iteration',
    'step',
    'screenshot',
    'compact',
    'escalation',
    'log',
    'message',
    'delivery',
    'request',
    'action',
    'transfer',
    'input',
    'done',
  ])
    source.addEventListener(t, onEvent)
  source.addEventListener('closed', () => {
    item($('timeline'), 'the run closed its trace')
    source.close()
  })
  void refreshInbox()
}

async function main() {
  let me
  try {
    me = await api(`${base}auth/me`)
  } catch {
    $('signin').hidden = false
    return
  }
  $('who').textContent = `${me.name ?? me.sub} (${[...me.roles].join(', ')})`
  $('logout').hidden = false
  $('logout').onclick = async () => {
    await api(`${base}auth/session`, { method: 'DELETE' })
    location.reload()
  }
  const { sessions } = await api(`${base}sessions`)
  for (const s of sessions) {
    const li = item($('sessions'), s.kasmId)
    li.dataset.id = s.kasmId
    li.onclick = () => open(s.kasmId)
  }
  $('compose').addEventListener('submit', (e) => {
    e.preventDefault()
    void send({ text: $('text').value }).then(() => {
      $('text').value = ''
    })
  })
  $('stop').onclick = () => action('stop')
  $('finish').onclick = () => action('finish_handoff')
  if (sessions.length === 1) open(sessions[0].kasmId)
}

void main()
