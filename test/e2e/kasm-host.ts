import assert from 'node:assert/strict'
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import type { TestContext } from 'node:test'
import { fileURLToPath } from 'node:url'
import { startNginx } from '../helpers/nginx.ts'
import { waitFor } from '../helpers/wait.ts'

/**
 * Kasm's public host, as a team wires it: a real nginx with deploy/kasm/nginx-location.conf's gateway
 * locations exactly as shipped (the runtime's port map and the gateway's base path), and, where Kasm's own
 * proxy would serve the viewer, a stand-in viewer page with KasmVNC's isolation headers. The identity provider
 * sits on the same origin under /idp/, as a team's IdP may sit beside Kasm.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..')

/** The gateway's `location` blocks of the recipe (everything but Kasm's own `location /`), verbatim. */
export async function recipeLocations(): Promise<string[]> {
  const conf = await readFile(join(root, 'deploy/kasm/nginx-location.conf'), 'utf8')
  // A block runs from its `location … {` line to the next line that is just its closing brace.
  const blocks = [...conf.matchAll(/^ {4}location .*\{\n[\s\S]*?\n {4}\}/gm)].map((m) => m[0])
  const gateway = blocks.filter((b) => !/^ {4}location \/ \{/.test(b))
  assert.ok(gateway.length >= 3, 'the recipe routes the port map and the base path')
  return gateway
}

/** Starts nginx on `port`; the gateway, the IdP and the viewer behind it. Stopped by `t.after`. */
export async function startKasmHost(
  t: TestContext,
  options: { port: number; gatewayPort: number; idpPort: number },
): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'krg-kasm-host-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const viewer = join(dir, 'vnc')
  await mkdir(viewer)
  for (const file of ['index.html', 'sidebar.js', 'viewer.css'])
    await copyFile(join(root, 'test/e2e/viewer', file), join(viewer, file))
  // The sidebar parses SSE with the same library the gateway uses, served from the viewer's own origin.
  await copyFile(
    join(root, 'node_modules/eventsource-parser/dist/index.js'),
    join(viewer, 'eventsource-parser.js'),
  )

  const locations = await recipeLocations()
  const conf = `daemon off;
master_process off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events {}
http {
  access_log off;
  types { text/html html; text/javascript js; text/css css; }
  ${['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((p) => `${p}_temp_path ${dir}/${p};`).join('\n  ')}
  upstream kasm_runtime_gateway {
    server 127.0.0.1:${options.gatewayPort};
    keepalive 32;
  }
  server {
    listen 127.0.0.1:${options.port};
    server_name kasm.test;
${locations.join('\n')}

    # Kasm's viewer (Kasm's own proxy serves it in a real deployment), with KasmVNC's headers.
    location ~ "^/desktop/[A-Za-z0-9_-]+/vnc/(.*)$" {
        alias ${viewer}/$1;
        add_header Cross-Origin-Embedder-Policy require-corp always;
        add_header Cross-Origin-Opener-Policy same-origin always;
        add_header Cache-Control no-store always;
    }

    # The identity provider beside Kasm.
    location /idp/ {
        proxy_pass http://127.0.0.1:${options.idpPort};
        proxy_set_header Host $http_host;
        proxy_set_header X-Forwarded-Proto $scheme;
    }
  }
}
`
  await writeFile(join(dir, 'nginx.conf'), conf)
  const nginx = await startNginx(dir, join(dir, 'nginx.conf'))
  t.after(
    () =>
      new Promise<void>((done) => {
        if (nginx.exitCode !== null) return done()
        nginx.once('exit', () => done())
        nginx.kill('SIGTERM')
      }),
  )
  const origin = `http://127.0.0.1:${options.port}`
  await waitFor('nginx to answer', () =>
    fetch(`${origin}/healthz-not-routed`).then(
      () => true,
      () => false,
    ),
  )
  return origin
}
