/**
 * Typed request fields of the Sidebar protocol: checking a request's field definitions, and a reply's values
 * against them. The simulated runtime enforces these rules, and the console checks a reply with them in the
 * page before sending it, so a person sees the runtime's verdict before the round trip.
 *
 * Where the protocol is silent: `pattern` is an ECMAScript regular expression (with the `u` flag) matched
 * anywhere in the value, as in JSON Schema; lengths count code points; an empty string or an empty list
 * does not satisfy `required`; an attachment value is an uploaded attachment id; `accept` lists MIME types
 * or `type/*` wildcards. Definitions carry only known keys, so a typo in a constraint is refused (422)
 * instead of silently unenforced.
 */
export type FieldType = 'string' | 'integer' | 'number' | 'boolean' | 'string[]' | 'attachment'

/** A field as the request carries it: id, type, display keys and the constraints of its type. */
export interface FieldDef {
  id: string
  type: FieldType
  required?: boolean
  label?: string
  help?: string
  hint?: string
  max_length?: number
  enum?: string[]
  pattern?: string
  minimum?: number
  maximum?: number
  min_items?: number
  max_items?: number
  accept?: string[]
  max_bytes?: number
}

/** One problem, in the shape of a 422 body's `fields` list. */
export interface FieldIssue {
  field: string
  error: string
}

/** What a reply validator needs to know about an uploaded attachment. */
export interface AttachmentInfo {
  mime: string
  size: number
}

const COMMON_KEYS = ['id', 'type', 'required', 'label', 'help', 'hint']
const TYPE_KEYS: Record<FieldType, string[]> = {
  string: ['max_length', 'enum', 'pattern'],
  integer: ['minimum', 'maximum'],
  number: ['minimum', 'maximum'],
  boolean: [],
  'string[]': ['enum', 'min_items', 'max_items'],
  attachment: ['accept', 'max_bytes'],
}
const MAX_FIELDS = 32
const FIELD_ID = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/
const MIME_PATTERN = /^[a-z0-9!#$&^_.+-]+\/(\*|[a-z0-9!#$&^_.+-]+)$/i

/** Whether `value` is one of the field types of protocol version 1 as this code knows it. */
export function isFieldType(value: unknown): value is FieldType {
  return typeof value === 'string' && Object.hasOwn(TYPE_KEYS, value)
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

const codePoints = (value: string): number => [...value].length
const isNonNegativeInt = (value: unknown): value is number =>
  Number.isSafeInteger(value) && (value as number) >= 0
const isStringList = (value: unknown): value is string[] =>
  Array.isArray(value) && value.every((item) => typeof item === 'string')

/**
 * Checks `fields` (already known to be an array) and returns the problems; an empty list means the
 * definitions are usable as {@link FieldDef}s. `futureTypes` are types of a newer protocol release (v1 is
 * additive): accepted with any constraint, since their rules are not known here.
 */
export function checkFieldDefs(
  fields: unknown[],
  futureTypes: ReadonlySet<string> = new Set(),
): FieldIssue[] {
  const issues: FieldIssue[] = []
  if (fields.length === 0) issues.push({ field: 'fields', error: 'at least one field is required' })
  if (fields.length > MAX_FIELDS) issues.push({ field: 'fields', error: `at most ${MAX_FIELDS} fields` })
  const seen = new Set<string>()
  fields.forEach((def, index) => {
    if (!isRecord(def)) {
      issues.push({ field: `fields[${index}]`, error: 'must be an object' })
      return
    }
    const name = typeof def.id === 'string' && def.id !== '' ? def.id : `fields[${index}]`
    const add = (error: string): void => void issues.push({ field: name, error })
    if (typeof def.id !== 'string' || !FIELD_ID.test(def.id)) add('id must be a short identifier')
    else if (seen.has(def.id)) add('duplicate id')
    else seen.add(def.id)
    if (typeof def.type === 'string' && futureTypes.has(def.type)) return
    if (!isFieldType(def.type)) {
      add(`unsupported type ${JSON.stringify(def.type)}`)
      return
    }
    const allowed = new Set([...COMMON_KEYS, ...TYPE_KEYS[def.type]])
    for (const key of Object.keys(def)) if (!allowed.has(key)) add(`unknown key ${key} for type ${def.type}`)
    if (def.required !== undefined && typeof def.required !== 'boolean') add('required must be a boolean')
    for (const key of ['label', 'help', 'hint']) {
      if (def[key] !== undefined && typeof def[key] !== 'string') add(`${key} must be a string`)
    }
    checkConstraints(def, def.type, add)
  })
  return issues
}

function checkConstraints(def: Record<string, unknown>, type: FieldType, add: (error: string) => void): void {
  if (def.max_length !== undefined && !(isNonNegativeInt(def.max_length) && def.max_length > 0)) {
    add('max_length must be a positive integer')
  }
  if (def.enum !== undefined || type === 'string[]') {
    if (!isStringList(def.enum) || def.enum.length === 0) add('enum must be a non-empty list of strings')
    else if (new Set(def.enum).size !== def.enum.length) add('enum has duplicates')
  }
  if (def.pattern !== undefined) {
    if (typeof def.pattern !== 'string') add('pattern must be a string')
    else {
      try {
        new RegExp(def.pattern, 'u')
      } catch {
        add('pattern is not a valid regular expression')
      }
    }
  }
  for (const key of ['minimum', 'maximum']) {
    const bound = def[key]
    if (bound === undefined) continue
    if (typeof bound !== 'number' || !Number.isFinite(bound)) add(`${key} must be a number`)
    else if (type === 'integer' && !Number.isSafeInteger(bound)) add(`${key} must be an integer`)
  }
  if (typeof def.minimum === 'number' && typeof def.maximum === 'number' && def.minimum > def.maximum) {
    add('minimum is above maximum')
  }
  for (const key of ['min_items', 'max_items']) {
    if (def[key] !== undefined && !isNonNegativeInt(def[key])) add(`${key} must be a non-negative integer`)
  }
  if (isNonNegativeInt(def.min_items) && isNonNegativeInt(def.max_items) && def.min_items > def.max_items) {
    add('min_items is above max_items')
  }
  if (def.accept !== undefined) {
    if (
      !isStringList(def.accept) ||
      def.accept.length === 0 ||
      !def.accept.every((m) => MIME_PATTERN.test(m))
    ) {
      add('accept must be a non-empty list of MIME types')
    }
  }
  if (def.max_bytes !== undefined && !(isNonNegativeInt(def.max_bytes) && def.max_bytes > 0)) {
    add('max_bytes must be a positive integer')
  }
}

function isEmpty(value: unknown): boolean {
  return value === undefined || value === null || value === '' || (Array.isArray(value) && value.length === 0)
}

function accepts(accept: string[], mime: string): boolean {
  const lower = mime.toLowerCase()
  return accept.some((entry) => {
    const wanted = entry.toLowerCase()
    return wanted.endsWith('/*') ? lower.startsWith(wanted.slice(0, -1)) : lower === wanted
  })
}

/**
 * Validates a reply's `values` against the request's fields; returns one issue per bad field (empty when
 * the reply is valid). `attachment` resolves an attachment id, or null when there is no such upload.
 */
export function checkReply(
  fields: readonly FieldDef[],
  values: Record<string, unknown>,
  attachment: (id: string) => AttachmentInfo | null,
): FieldIssue[] {
  const issues: FieldIssue[] = []
  const known = new Set(fields.map((field) => field.id))
  for (const key of Object.keys(values))
    if (!known.has(key)) issues.push({ field: key, error: 'unknown field' })
  for (const field of fields) {
    const value = values[field.id]
    if (isEmpty(value)) {
      if (field.required === true) issues.push({ field: field.id, error: 'required' })
      // An optional empty list still has to satisfy min_items; everything else empty is simply unanswered.
      if (!(field.type === 'string[]' && Array.isArray(value))) continue
    }
    const error = checkValue(field, value, attachment)
    if (error !== null) issues.push({ field: field.id, error })
  }
  return issues
}

function checkValue(
  field: FieldDef,
  value: unknown,
  attachment: (id: string) => AttachmentInfo | null,
): string | null {
  switch (field.type) {
    case 'string': {
      if (typeof value !== 'string') return 'must be a string'
      if (field.max_length !== undefined && codePoints(value) > field.max_length) {
        return `longer than ${field.max_length} characters`
      }
      if (field.enum !== undefined && !field.enum.includes(value))
        return `must be one of ${field.enum.join(', ')}`
      if (field.pattern !== undefined && !new RegExp(field.pattern, 'u').test(value)) {
        return `does not match ${field.pattern}`
      }
      return null
    }
    case 'integer':
    case 'number': {
      if (typeof value !== 'number' || !Number.isFinite(value)) return 'must be a number'
      if (field.type === 'integer' && !Number.isSafeInteger(value)) return 'must be an integer'
      if (field.minimum !== undefined && value < field.minimum) return `must be at least ${field.minimum}`
      if (field.maximum !== undefined && value > field.maximum) return `must be at most ${field.maximum}`
      return null
    }
    case 'boolean':
      return typeof value === 'boolean' ? null : 'must be true or false'
    case 'string[]': {
      if (!isStringList(value)) return 'must be a list of strings'
      const options = field.enum ?? []
      const outside = value.filter((item) => !options.includes(item))
      if (outside.length > 0) return `not among the options: ${outside.join(', ')}`
      if (new Set(value).size !== value.length) return 'has duplicates'
      if (field.min_items !== undefined && value.length < field.min_items) {
        return `choose at least ${field.min_items}`
      }
      if (field.max_items !== undefined && value.length > field.max_items)
        return `choose at most ${field.max_items}`
      return null
    }
    case 'attachment': {
      if (typeof value !== 'string') return 'must be an attachment id'
      const info = attachment(value)
      if (info === null) return 'no such attachment'
      if (field.accept !== undefined && !accepts(field.accept, info.mime)) {
        return `type ${info.mime} is not accepted (${field.accept.join(', ')})`
      }
      if (field.max_bytes !== undefined && info.size > field.max_bytes)
        return `larger than ${field.max_bytes} bytes`
      return null
    }
    default:
      // A type of a newer release (see checkFieldDefs): only its presence was checked.
      return null
  }
}
