/**
 * A few DOM helpers. Every string from a runtime (or anyone) becomes a text node or an attribute value:
 * nothing is ever parsed as HTML (the page's CSP disables those sinks altogether).
 */

type Child = Node | string | number | null | undefined | false
type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>

/** Creates an element: attributes (`on*` functions become listeners; false/null are left out) and children. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag)
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue
    if (typeof value === 'function') el.addEventListener(name.slice(2), value)
    else el.setAttribute(name, value === true ? '' : String(value))
  }
  append(el, children)
  return el
}

function nodes(children: readonly Child[]): (Node | string)[] {
  const out: (Node | string)[] = []
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue
    out.push(typeof child === 'object' ? child : String(child))
  }
  return out
}

/** Appends children (strings as text) in one DOM operation. */
export function append(parent: Element | DocumentFragment, children: readonly Child[]): void {
  parent.append(...nodes(children))
}

/** Replaces an element's children in one DOM operation. */
export function replace(parent: Element, ...children: Child[]): void {
  parent.replaceChildren(...nodes(children))
}

/** Sets text only when it changed (no layout work for an unchanged countdown or badge). */
export function setText(el: Element, value: string): void {
  if (el.textContent !== value) el.textContent = value
}

let ids = 0
/** A unique element id with a readable prefix. */
export function uid(prefix: string): string {
  ids++
  return `${prefix}-${ids}`
}

/** Says something to screen readers through the page's polite live region. */
export function announce(message: string): void {
  const region = document.getElementById('announcer')
  if (region === null) return
  region.textContent = ''
  // A fresh text node is announced even when the words repeat.
  requestAnimationFrame(() => {
    region.textContent = message
  })
}

/** A function that runs `fn` once on the next animation frame, however often it is called before then. */
export function perFrame(fn: () => void): () => void {
  let scheduled = false
  return () => {
    if (scheduled) return
    scheduled = true
    requestAnimationFrame(() => {
      scheduled = false
      fn()
    })
  }
}
