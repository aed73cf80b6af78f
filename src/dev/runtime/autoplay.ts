/**
 * Demo mode: a believable run, forever. Each run opens with an info snapshot (with a goal) and the boot,
 * launch and agentic phases; then every tick is one model call (iteration), the step it took and a
 * screenshot, with a log line now and then. The agent asks a typed question every so often and waits for
 * it (the reply closes it; nobody answering is a timeout after 90 s). Operator messages reach the loop
 * through the inbox's loop consumer, and the next model call acknowledges them. A run ends with a pass
 * after its script, with `test-error`/`escalated` when every second run hands the session to a person
 * (I'm done, finish ends the pause early), or when a stop has taken effect; a new run starts a few ticks
 * later.
 */
import type { RunState, RuntimeCore } from './core.ts'
import type { MessageRecord } from './records.ts'

interface ScriptStep {
  think: string
  tool: string
  args: Record<string, unknown>
  rung: 'a11y' | 'ocr' | 'pixel'
  expect: string
  result: string
}

interface ScriptQuestion {
  title: string
  help?: string
  fields: Record<string, unknown>[]
}

/** What one demo session plays: its app, its goal, the steps towards it and the questions on the way. */
interface Play {
  readonly app: string
  readonly version: string
  /** The app's window title, as the launch logs it. */
  readonly window: string
  readonly goal: string
  readonly url: string
  readonly steps: readonly ScriptStep[]
  readonly questions: readonly ScriptQuestion[]
  /** The run's conclusion when it reaches its goal. */
  readonly passed: string
  /** Why every second run hands the session to a person. */
  readonly handoff: string
}

const EXPENSES_STEPS: ScriptStep[] = [
  {
    think: 'The Expenses app is open on the reports list. I will start a new report.',
    tool: 'click',
    args: { text: 'New report' },
    rung: 'a11y',
    expect: 'an empty report form',
    result: 'clicked "New report"; form "Untitled report" opened',
  },
  {
    think: 'Give the report a title first.',
    tool: 'type',
    args: { field: 'Title', text: 'March travel' },
    rung: 'a11y',
    expect: 'title field filled',
    result: 'typed 12 characters into "Title"',
  },
  {
    think: 'Add the first expense line: the train ticket.',
    tool: 'click',
    args: { text: 'Add expense' },
    rung: 'a11y',
    expect: 'a new expense row',
    result: 'row 1 added',
  },
  {
    think: 'Fill in the amount from the receipt.',
    tool: 'type',
    args: { field: 'Amount', text: '182.40' },
    rung: 'ocr',
    expect: 'amount 182.40',
    result: 'typed "182.40" into "Amount"',
  },
  {
    think: 'The category is travel.',
    tool: 'select',
    args: { field: 'Category', value: 'Travel' },
    rung: 'a11y',
    expect: 'category Travel',
    result: 'selected "Travel"',
  },
  {
    think: 'Attach the receipt from the Downloads folder.',
    tool: 'attach',
    args: { file: 'receipt-0311.pdf' },
    rung: 'a11y',
    expect: 'receipt listed',
    result: 'attached receipt-0311.pdf (41 KB)',
  },
  {
    think: 'Add the hotel as a second line.',
    tool: 'click',
    args: { text: 'Add expense' },
    rung: 'a11y',
    expect: 'a second expense row',
    result: 'row 2 added',
  },
  {
    think: 'Hotel amount, two nights.',
    tool: 'type',
    args: { field: 'Amount', text: '246.00' },
    rung: 'ocr',
    expect: 'amount 246.00',
    result: 'typed "246.00" into "Amount"',
  },
  {
    think: 'Save a draft before going further.',
    tool: 'click',
    args: { text: 'Save draft' },
    rung: 'pixel',
    expect: 'toast "Draft saved"',
    result: 'toast "Draft saved" seen after 640 ms',
  },
  {
    think: 'Check that the total matches the two receipts.',
    tool: 'read',
    args: { region: 'totals' },
    rung: 'ocr',
    expect: 'total 428.40',
    result: 'read "Total 428.40 EUR"',
  },
  {
    think: 'Everything matches; submit for approval.',
    tool: 'click',
    args: { text: 'Submit' },
    rung: 'a11y',
    expect: 'status Submitted',
    result: 'dialog "Submit report?" opened',
  },
  {
    think: 'Confirm the dialog.',
    tool: 'click',
    args: { text: 'Confirm' },
    rung: 'a11y',
    expect: 'status Submitted',
    result: 'status shows "Submitted"',
  },
]

const EXPENSES_QUESTIONS: ScriptQuestion[] = [
  {
    title: 'Which cost centre should the March report go to?',
    help: 'The app offers three cost centres and the goal does not say which.',
    fields: [
      {
        id: 'cost_centre',
        type: 'string',
        required: true,
        enum: ['CC-100 Sales', 'CC-200 Engineering', 'CC-300 Support'],
        label: 'Cost centre',
        hint: 'radio',
      },
      { id: 'note', type: 'string', max_length: 200, label: 'Note for the approver' },
    ],
  },
  {
    title: 'How many hotel nights should I claim?',
    fields: [{ id: 'nights', type: 'integer', required: true, minimum: 0, maximum: 14, label: 'Nights' }],
  },
  {
    title: 'The receipt total differs from the card statement by 2.10 EUR. Submit anyway?',
    fields: [
      { id: 'submit', type: 'boolean', required: true, label: 'Submit anyway' },
      { id: 'reason', type: 'string', max_length: 300, label: 'Reason, if not' },
    ],
  },
]

const CRM_STEPS: ScriptStep[] = [
  {
    think: 'The CRM is open on the contacts list. Find the ACME duplicates first.',
    tool: 'type',
    args: { field: 'Search', text: 'ACME' },
    rung: 'a11y',
    expect: 'contacts matching ACME',
    result: 'typed 4 characters into "Search"; 14 contacts listed',
  },
  {
    think: 'Open the duplicates view the CRM offers.',
    tool: 'click',
    args: { text: 'Find duplicates' },
    rung: 'a11y',
    expect: 'pairs of duplicate contacts',
    result: '6 pairs of duplicates found',
  },
  {
    think: 'Start with the first pair: same name, two phone numbers.',
    tool: 'click',
    args: { text: 'Compare' },
    rung: 'a11y',
    expect: 'a side-by-side comparison',
    result: 'comparison of "ACME Ltd (London)" and "ACME Limited" opened',
  },
  {
    think: 'Read both records before choosing what to keep.',
    tool: 'read',
    args: { region: 'comparison' },
    rung: 'ocr',
    expect: 'both records read',
    result: 'read 2 records: 11 fields each, 3 differ',
  },
  {
    think: 'Keep the newer address and both phone numbers.',
    tool: 'click',
    args: { text: 'Merge' },
    rung: 'a11y',
    expect: 'a merge preview',
    result: 'merge preview shows 1 record with 2 phone numbers',
  },
  {
    think: 'Confirm the merge.',
    tool: 'click',
    args: { text: 'Confirm merge' },
    rung: 'pixel',
    expect: 'toast "Contacts merged"',
    result: 'toast "Contacts merged" seen after 410 ms',
  },
]

const CRM_QUESTIONS: ScriptQuestion[] = [
  {
    title: 'Two ACME records have different account owners. Whose should the merged one keep?',
    fields: [
      {
        id: 'owner',
        type: 'string',
        required: true,
        enum: ['Priya Shah', 'Tom Becker'],
        label: 'Account owner',
        hint: 'radio',
      },
    ],
  },
  {
    title: 'Which tags should the merged ACME record keep?',
    fields: [
      {
        id: 'tags',
        type: 'string[]',
        enum: ['customer', 'partner', 'reseller', 'archived'],
        min_items: 1,
        label: 'Tags',
      },
    ],
  },
]

/** The demo's plays, by name. */
export const PLAYS = {
  expenses: {
    app: 'expenses',
    version: '4.2.1',
    window: 'Expenses — Acme',
    goal: 'File the March travel expenses in the Expenses app and submit them for approval',
    url: 'https://expenses.example.test/reports',
    steps: EXPENSES_STEPS,
    questions: EXPENSES_QUESTIONS,
    passed: 'The March report was filed and submitted for approval.',
    handoff: 'the approval step asks for a second factor on a phone',
  },
  crm: {
    app: 'crm',
    version: '11.0.3',
    window: 'Contacts — Acme CRM',
    goal: 'Merge the duplicate ACME contacts in the CRM',
    url: 'https://crm.example.test/contacts',
    steps: CRM_STEPS,
    questions: CRM_QUESTIONS,
    passed: 'The duplicate ACME contacts were merged.',
    handoff: 'merging needs an approval code sent to the account owner',
  },
} as const satisfies Record<string, Play>

/** A play's name. */
export type PlayName = keyof typeof PLAYS

const QUESTION_EVERY = 9
const QUESTION_DEADLINE_S = 90
const STEPS_PER_RUN = 48
const TICKS_BETWEEN_RUNS = 3

type Phase = 'opening' | 'working' | 'waiting' | 'handoff' | 'ended'

class Autoplay {
  private readonly core: RuntimeCore
  private readonly play: Play
  private run: RunState
  private runCount = 1
  private phase: Phase = 'opening'
  private ticks = 0
  private steps = 0
  private question: string | null = null
  private questionCount = 0
  /** The step count when the last question was asked: one question per stretch of steps. */
  private askedAtStep = -1
  private readonly unread: MessageRecord[] = []

  constructor(core: RuntimeCore, play: Play) {
    this.core = core
    this.play = play
    this.run = core.current
    core.hooks.onMessage = (message) => {
      if (message.reply_to === undefined) this.unread.push(message)
    }
    core.hooks.onRequestClosed = (request) => {
      if (request.request_id !== this.question || request.run !== this.run.run) return
      this.question = null
      if (this.phase === 'waiting') this.phase = 'working'
      if (request.closed_by === 'timeout') {
        this.say(
          'warn',
          `no answer to ${request.request_id} within ${QUESTION_DEADLINE_S} s; carrying on with my own judgement`,
        )
      } else if (request.closed_by === 'reply') {
        const reply = this.run.messagesById.get(request.reply_id ?? '')
        this.say('info', `answer to ${request.request_id}: ${JSON.stringify(reply?.values ?? {})}`)
      }
    }
    core.hooks.onLoopExit = (reason) => this.end(reason)
  }

  tick(): void {
    if (this.core.current !== this.run) this.restart()
    if (this.run.trace.ending !== 'open' && this.phase !== 'ended') this.phase = 'ended'
    this.ticks++
    switch (this.phase) {
      case 'opening':
        this.open()
        return
      case 'working':
        this.work()
        return
      case 'waiting':
        if (this.ticks % 5 === 0) this.say('info', `waiting for a person to answer ${this.question}`)
        return
      case 'handoff':
        // The core ends the pause (runner.escalation_pause_s, or I'm done, finish) and calls onLoopExit.
        return
      case 'ended':
        if (this.ticks >= TICKS_BETWEEN_RUNS) {
          this.core.newRun()
          this.restart()
        }
        return
    }
  }

  private restart(): void {
    this.run = this.core.current
    this.runCount++
    this.phase = 'opening'
    this.ticks = 0
    this.steps = 0
    this.question = null
    this.askedAtStep = -1
    this.unread.length = 0
  }

  private emit(type: string, payload?: unknown): void {
    this.core.emitFor(this.run, type, payload)
  }

  private say(level: 'info' | 'warn' | 'error', msg: string): void {
    this.emit('log', { level, msg })
  }

  private open(): void {
    if (this.ticks === 1) {
      // The first run learns its goal now; later runs' opening info (from newRun) already carries it.
      if (this.core.infoExtra.goal === undefined) {
        const { app, version, goal, steps } = this.play
        this.core.infoExtra = { app, version, goal, plan_steps: steps.length }
        this.emit('info', this.core.info())
      }
      this.emit('status', { phase: 'boot', detail: 'starting Xvfb :1 and the window manager' })
    } else if (this.ticks === 2) {
      this.emit('status', { phase: 'launch', detail: `launching ${this.play.app}` })
      this.say('info', `window "${this.play.window}" appeared after 1.8 s`)
    } else {
      this.emit('status', { phase: 'agentic', detail: `goal: ${this.play.goal}` })
      this.phase = 'working'
    }
  }

  private work(): void {
    if (this.core.loop !== 'running' || this.run.stoppingTool !== null) return
    if (this.steps >= STEPS_PER_RUN) {
      if (this.runCount % 2 === 0) this.escalate()
      else this.finish('pass', 'passed', this.play.passed)
      return
    }
    const due = this.steps > 0 && this.steps % QUESTION_EVERY === 0 && this.askedAtStep !== this.steps
    if (due && this.question === null) {
      this.askedAtStep = this.steps
      if (this.askQuestion()) return
    }
    const { steps } = this.play
    const script = steps[this.steps % steps.length] as ScriptStep
    this.steps++
    const heard = this.unread.splice(0)
    const think =
      heard.length > 0
        ? `The operator wrote: "${(heard[0]?.text ?? '').slice(0, 120)}". I will take that into account. ${script.think}`
        : script.think
    this.emit('iteration', {
      n: ++this.run.iterationSeq,
      content: think,
      tool_calls: [{ name: script.tool, args: script.args }],
      usage: {
        input_tokens: 2400 + this.run.iterationSeq * 180,
        output_tokens: 60 + (this.run.iterationSeq % 7) * 11,
      },
      model_ms: 700 + ((this.run.iterationSeq * 137) % 900),
    })
    const file = `screenshots/${String(this.steps).padStart(4, '0')}-${script.tool}.png`
    this.core.step(this.run, {
      action: `${script.tool}(${Object.entries(script.args)
        .map(([key, value]) => `${key}=${JSON.stringify(value)}`)
        .join(', ')})`,
      backend: 'desktop',
      rung: script.rung,
      expect: script.expect,
      result: script.result,
      duration_ms: 300 + ((this.steps * 211) % 1500),
      post: file,
      url: this.play.url,
    })
    this.emit('screenshot', {
      file,
      label: script.expect,
      step: this.run.stepSeq,
      width: 64,
      height: 40,
      bytes: 0,
    })
    if (this.steps % 4 === 0) this.say('info', `plan progress: ${this.steps % steps.length}/${steps.length}`)
  }

  private askQuestion(): boolean {
    const { questions } = this.play
    const question = questions[this.questionCount++ % questions.length]
    if (question === undefined) return false
    this.emit('iteration', {
      n: ++this.run.iterationSeq,
      content: 'I need a decision from a person before going on.',
      tool_calls: [{ name: 'ask_human', args: { title: question.title } }],
      usage: { input_tokens: 2600, output_tokens: 90 },
      model_ms: 820,
    })
    try {
      this.question = this.core.ask({ ...question, deadlineS: QUESTION_DEADLINE_S }).request_id
      this.phase = 'waiting'
      return true
    } catch {
      return false
    }
  }

  private escalate(): void {
    this.core.escalate(this.play.handoff)
    this.phase = 'handoff'
    this.ticks = 0
  }

  /** The loop exited (a stop took effect, or the handoff ended): the run finishes with the fixed verdict. */
  private end(reason: 'stopped' | 'handoff'): void {
    if (this.phase === 'ended') return
    if (reason === 'stopped')
      this.finish('inconclusive', 'stopped', 'Stopped by operator before the goal was reached.')
    else this.finish('test-error', 'escalated', `Handed to a person: ${this.play.handoff}.`)
  }

  private finish(verdict: string, outcome: string, summary: string): void {
    this.emit('status', {
      phase: 'done',
      verdict,
      outcome,
      model_verdict: verdict,
      summary,
      reasons: [],
      notes: [],
    })
    if (this.run.trace.ending === 'open' && this.run === this.core.current)
      this.core.closeTrace({ done: true })
    this.phase = 'ended'
    this.ticks = 0
  }
}

/** Starts demo autoplay of `play` on `core`; returns the function that stops it. */
export function startAutoplay(
  core: RuntimeCore,
  intervalMs: number,
  play: PlayName = 'expenses',
): () => void {
  const autoplay = new Autoplay(core, PLAYS[play])
  return core.timers.every(Math.max(50, intervalMs), () => autoplay.tick())
}
