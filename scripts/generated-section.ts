/**
 * A generated part of a hand-written Markdown page: the text between two marker comments, which a `docs:*`
 * script rewrites and a test compares with what the script would write.
 */

/** The two markers around a generated section, and the page's name for error messages. */
export interface Markers {
  readonly page: string
  readonly begin: string
  readonly end: string
}

/** Where the section of `doc` starts and ends (inside its markers); throws when the markers are missing. */
function bounds(doc: string, markers: Markers): [number, number] {
  const start = doc.indexOf(markers.begin)
  const end = doc.indexOf(markers.end)
  if (start === -1 || end < start)
    throw new Error(`${markers.page} lacks the markers ${markers.begin} … ${markers.end}`)
  return [start + markers.begin.length, end]
}

/** The section between the markers of `doc`, trimmed. */
export function sectionIn(doc: string, markers: Markers): string {
  const [start, end] = bounds(doc, markers)
  return doc.slice(start, end).trim()
}

/** `doc` with the text between its markers replaced by `section`, one blank line either side. */
export function withSection(doc: string, markers: Markers, section: string): string {
  const [start, end] = bounds(doc, markers)
  return `${doc.slice(0, start)}\n\n${section}\n\n${doc.slice(end)}`
}
