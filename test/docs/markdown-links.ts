/**
 * What the link check reads in a Markdown file: the relative links (inline, images, reference definitions and
 * HTML `href`/`src`) outside code, and the anchors its headings and HTML ids make. A small reader rather than a
 * Markdown parser (none is a dependency): it handles what the repository's pages use, and skips fenced code
 * blocks and code spans so an example is never taken for a link.
 */

/** One link as written, with the line it is on. */
export interface MarkdownLink {
  readonly target: string
  readonly line: number
}

/** `text` with fenced code blocks blanked out (line numbers kept). */
function withoutFences(text: string): string[] {
  const out: string[] = []
  let fence: string | null = null
  for (const line of text.split('\n')) {
    const opener = /^\s{0,3}(`{3,}|~{3,})/.exec(line)?.[1]
    if (fence === null && opener !== undefined) {
      fence = opener
      out.push('')
    } else if (fence !== null) {
      // A fence closes with at least as many of the same character, and nothing after them.
      const closer = /^\s{0,3}(`{3,}|~{3,})\s*$/.exec(line)?.[1]
      if (closer !== undefined && closer[0] === fence[0] && closer.length >= fence.length) fence = null
      out.push('')
    } else out.push(line)
  }
  return out
}

/** A line without its code spans (any run of backticks up to the same run) and HTML comments. */
function withoutCode(line: string): string {
  return line.replace(/(`+)[\s\S]*?\1/g, '').replace(/<!--.*?-->/g, '')
}

/** Every link of a Markdown text whose target is not an absolute URL (http:, mailto:, //host …). */
export function relativeLinks(text: string): MarkdownLink[] {
  const links: MarkdownLink[] = []
  withoutFences(text).forEach((raw, index) => {
    const line = withoutCode(raw)
    const targets = [
      // [text](target "title") and ![alt](target), the target optionally in <>
      ...[...line.matchAll(/\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g)].map((m) => m[1]),
      // [label]: target
      ...[...line.matchAll(/^\s{0,3}\[[^\]]+\]:\s+(\S+)/g)].map((m) => m[1]),
      // <a href="…">, <img src="…">
      ...[...line.matchAll(/<(?:a|img)\s[^>]*?\b(?:href|src)="([^"]*)"/gi)].map((m) => m[1]),
    ]
    for (const found of targets) {
      if (found === undefined) continue
      const target = found.replace(/^<|>$/g, '')
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue
      links.push({ target, line: index + 1 })
    }
  })
  return links
}

/**
 * GitHub's anchor of a heading: its text as rendered (code spans' and links' text, no emphasis markers),
 * lowercased, every character that is not a letter, digit, mark, space, `-` or `_` removed, each space a `-`.
 */
export function slug(heading: string): string {
  const rendered = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`+/g, '')
    .replace(/<[^>]+>/g, '')
  return rendered
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '')
    .replace(/\s/g, '-')
}

/** Every anchor a Markdown text defines: its headings' slugs (repeats get -1, -2 …) and HTML ids and names. */
export function anchors(text: string): Set<string> {
  const out = new Set<string>()
  const seen = new Map<string, number>()
  for (const line of withoutFences(text)) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line)?.[1]
    if (heading !== undefined) {
      const base = slug(heading)
      const count = seen.get(base) ?? 0
      seen.set(base, count + 1)
      out.add(count === 0 ? base : `${base}-${count}`)
    }
    for (const m of withoutCode(line).matchAll(/<[a-z][^>]*?\b(?:id|name)="([^"]+)"/gi))
      if (m[1] !== undefined) out.add(m[1])
  }
  return out
}
