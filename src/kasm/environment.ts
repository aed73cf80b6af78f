/**
 * What a launch's `environment` may never set, whatever the team's allowlist (src/kasm/teams.ts) says. The
 * session's container runs the runtime that holds the messaging token, so a variable that configures the
 * runtime, or makes a program load code, read settings or trust certificates from elsewhere, would let
 * whoever launches take the token or the session over. Names are compared in any case, and `<NAME>_FILE` is
 * refused with `<NAME>` (the convention that reads a variable from a file).
 *
 * This list is a floor, not a boundary: programs honour more variables than any list holds. A team's
 * `environment` allowlist in GATEWAY_KASM_TEAMS_FILE is what limits a launch to known names.
 */

/** The session runtime's own settings: the gateway sets those it needs (token, observe gate, sidebar). */
const RUNTIME = /^KASM_(SESSION_)?RUNTIME(_|$)/

/** Prefixes of variables that load code: the dynamic loaders (glibc, musl, macOS) and bash's exported functions. */
const LOADER_PREFIXES = ['LD_', 'DYLD_', 'BASH_FUNC_']

/** Exact names that load code, change which program runs, or change what TLS trusts. */
const LOADER_NAMES: ReadonlySet<string> = new Set([
  // C library
  'GLIBC_TUNABLES',
  'GCONV_PATH',
  'PATH',
  // Node.js
  'NODE_OPTIONS',
  'NODE_PATH',
  'NODE_EXTRA_CA_CERTS',
  'NODE_TLS_REJECT_UNAUTHORIZED',
  // Python
  'PYTHONPATH',
  'PYTHONHOME',
  'PYTHONSTARTUP',
  'PYTHONUSERBASE',
  'PYTHONWARNINGS',
  'PYTHONBREAKPOINT',
  'PYTHONINSPECT',
  'PYTHONEXECUTABLE',
  // Perl, Ruby, Lua
  'PERL5LIB',
  'PERLLIB',
  'PERL5OPT',
  'PERL5DB',
  'RUBYLIB',
  'RUBYOPT',
  'LUA_PATH',
  'LUA_CPATH',
  'LUA_INIT',
  // Java
  'JAVA_TOOL_OPTIONS',
  '_JAVA_OPTIONS',
  'JDK_JAVA_OPTIONS',
  'CLASSPATH',
  // Shells
  'BASH_ENV',
  'ENV',
  'SHELLOPTS',
  'BASHOPTS',
  'PS4',
  'PROMPT_COMMAND',
  'IFS',
  // Desktop toolkits the session's browser loads modules through
  'GTK_MODULES',
  'GTK3_MODULES',
  'GTK_PATH',
  'GIO_EXTRA_MODULES',
  'QT_PLUGIN_PATH',
  'GST_PLUGIN_PATH',
  // TLS trust (OpenSSL and the tools built on it)
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  'REQUESTS_CA_BUNDLE',
  'CURL_CA_BUNDLE',
])

/**
 * Why no launch may set `name`, as a phrase that follows the name ("LD_PRELOAD loads code …"); undefined
 * when a launch may set it (the team's allowlist still applies).
 */
export function refusedEverywhere(name: string): string | undefined {
  const upper = name.toUpperCase()
  const names = upper.endsWith('_FILE') ? [upper, upper.slice(0, -'_FILE'.length)] : [upper]
  for (const n of names) {
    if (RUNTIME.test(n)) return 'configures the session runtime, which only the gateway sets'
    if (LOADER_NAMES.has(n) || LOADER_PREFIXES.some((prefix) => n.startsWith(prefix)))
      return 'changes what code the session runs or trusts'
  }
  return undefined
}
