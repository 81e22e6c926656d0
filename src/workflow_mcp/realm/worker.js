'use strict'
// workflow-mcp realm worker: runs one workflow body in a restricted V8 context.
//
// The host (Python) and this process talk in JSON lines over stdio (protocol version 1, see
// messages.py). Nothing from this file's realm is ever handed to workflow code: every global the
// workflow sees is created by PRELUDE inside the context, and values cross as JSON strings that the
// realm parses itself. All workflow code (the body, promise continuations, timer callbacks) runs
// inside `runInContext(..., {timeout})` calls, so the synchronous limit also holds after an await.
// Node's vm is not a security boundary; see the README's security section.

const vm = require('node:vm')
const crypto = require('node:crypto')
const readline = require('node:readline')
const { types } = require('node:util')
const { AsyncLocalStorage } = require('node:async_hooks')

const PROTOCOL = 1
// Output is buffered and written once per turn of Node's event loop: a fan-out of 1,000 agent()
// calls becomes one write, not 1,000.
let outBuf = []
const flushOut = () => { if (outBuf.length) { const text = outBuf.join(''); outBuf = []; process.stdout.write(text) } }
// JSON.stringify escapes exactly the lone UTF-16 surrogates (well-formed JSON.stringify); the host
// speaks UTF-8, which cannot carry them, so each becomes U+FFFD — what Node's own UTF-8 encoding
// (and so the cache-key hash) does with them too.
const LONE = /(\\+)u(d[89a-f][0-9a-f]{2})/gi
const wellFormed = (text) => text.indexOf('\\ud') === -1 && text.indexOf('\\uD') === -1 ? text
  : text.replace(LONE, (all, slashes) => (slashes.length % 2 === 1 ? slashes + 'ufffd' : all))
// Every line is at most MAX_MESSAGE bytes (worker.py passes MAX_MESSAGE_BYTES, newline included), so
// the host never meets a line it cannot read; what would exceed it is refused here, by name.
const MAX_MESSAGE = (() => {
  const arg = process.argv.find((a) => a.startsWith('--max-message-bytes='))
  const n = arg ? Number(arg.slice('--max-message-bytes='.length)) : NaN
  return n > 0 ? n : 64 * 1024 * 1024
})()
const MB = (n) => { const v = n / 1048576; return (v === Math.floor(v) ? v.toFixed(0) : v.toFixed(1)) + ' MB' }
const SIZE_ERROR = 'ERR_REALM_MESSAGE_SIZE'
function sizeError(msg, size) {
  const what = msg.t === 'done' ? "the workflow's final value"
    : msg.t === 'phase' ? 'the phase() title'
      : msg.t === 'call' && msg.fn === 'agent' ? 'this agent() prompt with its options'
        : msg.t === 'call' ? 'the workflow() args' : 'a ' + JSON.stringify(String(msg.t)) + ' message'
  const fix = msg.t === 'done' ? 'return less (let agents write large data to files and return their paths)'
    : 'pass less data (let agents read large inputs from files)'
  const verb = msg.t === 'call' && msg.fn !== 'agent' ? ' are ' : ' is '
  const err = new RangeError(what + verb + MB(size) + ' as a realm message; the realm passes at most ' +
    MB(MAX_MESSAGE) + ' per message (workflow-mcp limit); ' + fix)
  err.code = SIZE_ERROR
  return err
}
const tooLarge = (line) => line.length * 3 > MAX_MESSAGE && Buffer.byteLength(line) > MAX_MESSAGE
const out = (msg) => {
  let line = wellFormed(JSON.stringify(msg)) + '\n'
  if (tooLarge(line)) {
    const err = sizeError(msg, Buffer.byteLength(line))
    // A realm request fails where it was made (agent(), workflow(), phase() throw or reject); the
    // final value fails the run; anything else is a worker bug and fails the run too.
    if (msg.t === 'call' || msg.t === 'phase') throw err
    line = wellFormed(JSON.stringify({ t: 'done', ok: false, error: { name: 'RangeError', message: err.message } })) + '\n'
    if (msg.t !== 'done') { finished = true; setImmediate(exitSoon) }
  }
  if (outBuf.length === 0) process.nextTick(flushOut)
  outBuf.push(line)
}

// Long text is cut in the middle, as Claude Code 2.1.332 cuts log lines (measured): a line longer than
// `max` UTF-16 units keeps its first and last `keep` units around a marker naming what was dropped.
function clip(text, max, keep) {
  if (typeof text !== 'string' || text.length <= max) return text
  return text.slice(0, keep) + '\n\n... [' + (text.length - 2 * keep) + ' characters truncated] ...\n\n' + text.slice(text.length - keep)
}
let logLine = { max: 11024, keep: 5000 }
let logLimit = { lines: 100000, chars: 64 * 1024 * 1024 }
const logSent = { lines: 0, chars: 0, dropped: 0 }
const ERROR_TEXT = { max: 65536, keep: 32768 }
const exitSoon = () => { flushOut(); process.stdout.write('', () => process.exit(0)) }

// ---------------------------------------------------------------------------------------------
// Cache-key chain (profile claude-code/2.1.332, PROFILE-FACTS "Journal and cache keys").
const H = (...parts) => crypto.createHash('sha256').update(parts.join('\0'), 'utf8').digest('hex')
const chainStore = new AsyncLocalStorage()
const rootCell = { chain: '' }
const cell = () => chainStore.getStore() || rootCell
const forks = new Map()
let nextFork = 0

// Values crossing to the host are bounded in depth (the host's JSON parser is recursive): the start
// message's maxValueDepth (definitions/profile.py MAX_VALUE_DEPTH), 256 until it arrives.
let MAX_DEPTH = 256
function depthOf(v, d) {
  if (d > MAX_DEPTH || v === null || typeof v !== 'object') return d
  let max = d
  for (const k in v) { const x = depthOf(v[k], d + 1); if (x > max) max = x; if (max > MAX_DEPTH) break }
  return max
}

function sortKeys(v, depth = 0) {
  if (depth > 2000) throw new RangeError('agent() options are nested too deeply to hash')
  if (Array.isArray(v)) return v.map((x) => sortKeys(x, depth + 1))
  if (v && typeof v === 'object') {
    const o = {}
    for (const k of Object.keys(v).sort()) o[k] = sortKeys(v[k], depth + 1)
    return o
  }
  return v
}

// Tool lists enter the key as sets: sorted, duplicates removed, an empty list counts as absent
// (profile claude-code/2.1.332, measured with the oracle). A list that is not an array of non-empty
// strings (a clamp entry must also read `Bash(<command>)`) is refused by Claude before it is keyed,
// so it yields `null`: the call gets no key and the chain does not advance.
const TOOL_LISTS = { disallowedTools: /^[\s\S]+$/, bashCommandClamp: /^Bash\(\S(?:[\s\S]*\S)?\)$/ }
function toolList(name, v) {
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string' && TOOL_LISTS[name].test(x))) return null
  return [...new Set(v)].sort()
}

// ---------------------------------------------------------------------------------------------
// The realm. PRELUDE is evaluated inside the context and returns the realm-side API to this file.
const PRELUDE = String.raw`(function (hostPost, hostFork, runSlot, hostJoin) {
  'use strict'
  const G = globalThis
  const JSONparse = JSON.parse, JSONstringify = JSON.stringify
  const ObjectFreeze = Object.freeze, ObjectCreate = Object.create, ObjectKeys = Object.keys
  const ObjectDefineProperty = Object.defineProperty, ObjectGetPrototypeOf = Object.getPrototypeOf
  const ArrayIsArray = Array.isArray, PromiseCtor = Promise, StringCtor = String
  const promiseThen = Promise.prototype.then
  const MapCtor = Map, SetCtor = Set, WeakSetCtor = WeakSet
  const ErrorCtor = Error, TypeErrorCtor = TypeError, RangeErrorCtor = RangeError
  const mapGet = Map.prototype.get, mapSet = Map.prototype.set, mapDelete = Map.prototype.delete
  const mapHas = Map.prototype.has
  const mapSize = Object.getOwnPropertyDescriptor(Map.prototype, 'size').get
  const setAdd = Set.prototype.add, setHas = Set.prototype.has, setDelete = Set.prototype.delete
  const wsAdd = WeakSet.prototype.add, wsHas = WeakSet.prototype.has
  const apply = Reflect.apply
  const ws = (s, v) => apply(wsAdd, s, [v]), wsh = (s, v) => apply(wsHas, s, [v])

  // Host functions never throw a host object into the realm: an error raised on the host side
  // (a stack overflow while encoding, a bug) becomes an Error made here, carrying only its message.
  // A host error's constructor chain would otherwise lead to the worker's own Function.
  function realmError(e) {
    let message = 'internal error'
    let sized = false
    try {
      if (e !== null && typeof e === 'object' && typeof e.message === 'string') message = '' + e.message
      sized = e !== null && typeof e === 'object' && e.code === 'ERR_REALM_MESSAGE_SIZE'
    } catch (x) {}
    // A message over the realm's size limit says so in the workflow's own words.
    return sized ? new RangeErrorCtor(message) : new ErrorCtor('workflow runtime error: ' + message)
  }
  const guard = (fn) => function (...argv) {
    try { return apply(fn, undefined, argv) } catch (e) { throw realmError(e) }
  }
  const post = guard(hostPost), fork = guard(hostFork), join = guard(hostJoin)

  // Determinism (profile claude-code/2.1.332): Date.now(), argless Date()/new Date() and
  // Math.random() throw; they would make resume identity depend on the wall clock.
  const RealDate = Date
  const nondeterministic = (what) => new ErrorCtor(what + ' is not available in workflows: results must ' +
    'replay identically on resume. Pass a timestamp or a seed through args instead.')
  const SafeDate = new Proxy(RealDate, {
    apply(target, self, argv) { throw nondeterministic('Date()') },
    construct(target, argv, nt) {
      if (argv.length === 0) throw nondeterministic('new Date()')
      return Reflect.construct(target, argv, nt)
    },
    get(target, prop, recv) {
      if (prop === 'now') return function now() { throw nondeterministic('Date.now()') }
      return Reflect.get(target, prop, recv)
    },
  })
  ObjectDefineProperty(RealDate.prototype, 'constructor', { value: SafeDate, writable: true, configurable: true })
  G.Date = SafeDate
  ObjectDefineProperty(Math, 'random', { value: function random() { throw nondeterministic('Math.random()') }, writable: true, configurable: true })
  delete G.WebAssembly
  for (const n of ['SharedArrayBuffer', 'WeakRef', 'FinalizationRegistry', 'Atomics']) delete G[n]

  let seq = 0
  const pending = new MapCtor()       // id -> {resolve, reject}
  const inbox = new MapCtor()          // id -> JSON text of the outcome
  const budgetErrors = new WeakSetCtor()
  let spent = 0
  let total = null

  // A null-prototype copy: an Object.prototype.toJSON the workflow defines cannot rewrite a message
  // (the host checks every message's shape as well).
  const send = (msg) => {
    const clean = ObjectCreate(null)
    const keys = ObjectKeys(msg)
    for (let i = 0; i < keys.length; i++) clean[keys[i]] = msg[keys[i]]
    return post(JSONstringify(clean))
  }
  const coerce = (v) => (v !== null && (typeof v === 'object' || typeof v === 'function')) ? '[' + typeof v + ']' : StringCtor(v)
  const jsonClone = (v) => { if (v === undefined) return undefined; const s = JSONstringify(v); return s === undefined ? undefined : JSONparse(s) }

  function makeError(e) {
    const Ctor = e.name === 'TypeError' ? TypeErrorCtor : e.name === 'RangeError' ? RangeErrorCtor : ErrorCtor
    const err = new Ctor(e.message)
    if (e.name && e.name !== 'TypeError' && e.name !== 'RangeError' && e.name !== 'Error') {
      ObjectDefineProperty(err, 'name', { value: e.name, writable: true, configurable: true })
    }
    if (e.code === 'budget_exceeded') ws(budgetErrors, err)
    return err
  }

  // A host request: the returned promise settles in a microtask, under the synchronous limit.
  function request(msg) {
    const id = ++seq
    msg.id = id
    const gate = new PromiseCtor((resolve) => { apply(mapSet, pending, [id, resolve]) })
    try { send(msg) } catch (e) {
      // Nothing was sent (e.g. the message is too large): nothing will answer, so nothing waits.
      apply(mapDelete, pending, [id])
      throw e
    }
    return apply(promiseThen, gate, [() => {
      const text = apply(mapGet, inbox, [id]); apply(mapDelete, inbox, [id])
      const r = JSONparse(text)
      if (typeof r.spent === 'number') spent = r.spent
      if (r.ok) return r.value === undefined ? undefined : r.value
      throw makeError(r.error)
    }])
  }

  const budget = ObjectCreate(null)
  ObjectDefineProperty(budget, 'total', { get: function total_() { return total }, enumerable: true })
  budget.spent = function spent_() { return spent }
  budget.remaining = function remaining() { return total === null ? Infinity : (total - spent > 0 ? total - spent : 0) }
  ObjectFreeze(budget)

  // console.* lines are workflow log lines, as in Claude Code 2.1.332 (measured): strings as they
  // are, other values as JSON (undefined as nothing), joined by spaces; warn and error are tagged.
  const consoleText = (v) => {
    if (typeof v === 'string') return v
    try { const j = JSONstringify(v); return j === undefined ? '' : j } catch (e) { return coerce(v) }
  }
  function makeConsole(child) {
    const c = ObjectCreate(null)
    for (const level of ['log', 'info', 'warn', 'error', 'debug']) {
      const tag = level === 'warn' || level === 'error' ? '[' + level + '] ' : ''
      c[level] = function (...argv) {
        let text = ''
        for (let i = 0; i < argv.length; i++) text += (i ? ' ' : '') + consoleText(argv[i])
        send({ t: 'log', message: tag + text, child })
      }
    }
    return ObjectFreeze(c)
  }
  const consoleObj = makeConsole(null)

  // Timers: the callback runs as a promise reaction, so it runs under the synchronous limit too.
  const timers = new MapCtor()
  function setTimeout_(fn, ms, ...rest) {
    const id = ++seq
    const delay = typeof ms === 'number' && ms > 0 ? ms : 0
    const gate = new PromiseCtor((resolve) => { apply(mapSet, pending, [id, resolve]) })
    apply(mapSet, timers, [id, true])
    apply(promiseThen, gate, [() => {
      if (!apply(mapHas, timers, [id])) return
      apply(mapDelete, timers, [id])
      if (typeof fn === 'function') fn(...rest)
    }])
    send({ t: 'timer', id, ms: delay })
    return id
  }
  function clearTimeout_(id) {
    if (apply(mapHas, timers, [id])) {
      apply(mapDelete, timers, [id])
      apply(mapDelete, pending, [id])
      send({ t: 'clear', id })
    }
  }

  function agentTypeName(v) {
    try { return StringCtor(v) } catch (e) { return '[object Object]' }
  }

  // One API per script: the top-level workflow (child === null) or a nested child workflow.
  function makeApi(child) {
    let currentPhase = null
    function agent(prompt, options) {
      const text = coerce(prompt)
      const opts = options !== null && typeof options === 'object' ? jsonClone(options) : {}
      // An explicit label is kept as given (coerced like a prompt; '' stays ''), as in Claude Code
      // 2.1.332 (measured); only an absent one falls back to the prompt's first 60 characters.
      const label = opts.label !== undefined && opts.label !== null ? coerce(opts.label)
        : StringCtor.prototype.trim.call(StringCtor.prototype.replace.call(StringCtor.prototype.slice.call(text, 0, 60), /\s+/g, ' '))
      const phaseTitle = child !== null ? child.phase : (typeof opts.phase === 'string' ? opts.phase : currentPhase)
      const call = { t: 'call', fn: 'agent', prompt: text, opts, label, phase: phaseTitle, child: child && child.name }
      // The host looks agentType up as String() of the options' copy (Claude Code 2.1.332, measured).
      if (opts.agentType !== undefined && opts.agentType !== null) call.agentType = agentTypeName(opts.agentType)
      return request(call)
    }
    function phase(title) {
      if (child !== null) return undefined
      const t = coerce(title)
      currentPhase = t
      send({ t: 'phase', title: t })
      return undefined
    }
    function log(value) {
      send({ t: 'log', message: coerce(value), child: child && child.name })
      return undefined
    }
    function workflow(target, childArgs) {
      if (child !== null) {
        return PromiseCtor.reject(new ErrorCtor('workflow() cannot be called from a nested workflow: ' +
          'nesting is limited to one level (profile claude-code/2.1.332).'))
      }
      let t
      if (typeof target === 'string') t = { name: target }
      else if (target !== null && typeof target === 'object' && typeof target.scriptPath === 'string') t = { scriptPath: target.scriptPath }
      else return PromiseCtor.reject(new TypeErrorCtor('workflow() takes a saved workflow name or { scriptPath }'))
      const msg = { t: 'call', fn: 'workflow', target: t }
      if (childArgs !== undefined) msg.args = JSONstringify(childArgs)
      return apply(promiseThen, request(msg), [(info) => runChild(info)])
    }
    return { agent, phase, log, workflow }
  }

  const factories = new MapCtor()
  function runChild(info) {
    const factory = apply(mapGet, factories, [info.token]); apply(mapDelete, factories, [info.token])
    const api = makeApi({ name: info.name, phase: info.phase })
    const childArgs = info.args === undefined ? undefined : JSONparse(info.args)
    const done = factory(api.agent, makeParallel(info.name), makePipeline(info.name), api.workflow, api.phase,
      api.log, childArgs, budget, makeConsole(info.name))
    return apply(promiseThen, done, [
      (value) => { send({ t: 'child', name: info.name, ok: true }); return value },
      (err) => { send({ t: 'child', name: info.name, ok: false, message: describe(err) }); throw err },
    ])
  }

  function describe(err) {
    try {
      if (err !== null && typeof err === 'object' && typeof err.message === 'string') return err.message
      return coerce(err)
    } catch (e) { return 'unknown error' }
  }

  function checkFanout(kind, items) {
    if (!ArrayIsArray(items)) throw new TypeErrorCtor(kind + '() takes an array')
    if (items.length > LIMITS.maxFanoutItems) {
      throw new RangeErrorCtor(kind + '() takes at most ' + LIMITS.maxFanoutItems + ' items, got ' + items.length +
        ' (profile ' + LIMITS.profile + ')')
    }
  }

  // Lines about a child's fan-out carry the child's name, like its own log() lines.
  function settleSlots(kind, forkId, runners, child) {
    return new PromiseCtor((resolveAll) => {
      const n = runners.length
      const results = new Array(n)
      let left = n
      let dropped = 0
      if (n === 0) { join(forkId); resolveAll([]); return }
      const finish = () => {
        join(forkId)
        if (dropped > 0) send({ t: 'log', message: kind + '(): ' + dropped + ' of ' + n + ' slots dropped: the token budget is spent', child })
        resolveAll(results)
      }
      for (let i = 0; i < n; i++) {
        const fail = (err) => {
          results[i] = null
          if (wsh(budgetErrors, err)) dropped++
          else send({ t: 'log', message: kind + '[' + i + '] failed: ' + describe(err), child })
        }
        let p
        // A slot's failure only ever reaches the log as text, so a host error here leaks nothing.
        try { p = runSlot(forkId, i, runners[i]) } catch (err) { fail(err); if (--left === 0) finish(); continue }
        apply(promiseThen, PromiseCtor.resolve(p), [(v) => { results[i] = v; if (--left === 0) finish() },
          (err) => { fail(err); if (--left === 0) finish() }])
      }
    })
  }

  const makeParallel = (child) => function parallel(thunks) {
    try {
      checkFanout('parallel', thunks)
      for (let i = 0; i < thunks.length; i++) {
        if (typeof thunks[i] !== 'function') {
          throw new TypeErrorCtor('parallel() entry ' + i + ' is not a function: wrap each call in a thunk, ' +
            'e.g. parallel([() => agent(...)]), so the runtime can start it under its concurrency limit')
        }
      }
    } catch (err) { return PromiseCtor.reject(err) }
    const forkId = fork('parallel', thunks.length)
    return settleSlots('parallel', forkId, thunks.map((fn) => () => fn()), child)
  }

  const makePipeline = (child) => function pipeline(items, ...stages) {
    try {
      checkFanout('pipeline', items)
      for (let s = 0; s < stages.length; s++) {
        if (typeof stages[s] !== 'function') throw new TypeErrorCtor('pipeline() stage ' + (s + 1) + ' is not a function')
      }
    } catch (err) { return PromiseCtor.reject(err) }
    const copy = jsonClone(items) || []
    if (stages.length === 0) {
      join(fork('pipeline', items.length))  // Claude forks and joins the untouched slot chains
      return PromiseCtor.resolve(copy)
    }
    const forkId = fork('pipeline', items.length)
    return settleSlots('pipeline', forkId, items.map((item, index) => async () => {
      let prev = item
      for (let s = 0; s < stages.length; s++) {
        prev = await stages[s](prev, item, index)
        if (prev === null) return null
      }
      return prev
    }), child)
  }
  const parallel = makeParallel(null)
  const pipeline = makePipeline(null)

  const LIMITS = { maxFanoutItems: 4096, profile: '', maxValueDepth: 256 }
  const top = makeApi(null)
  const globals = {
    agent: top.agent, parallel, pipeline, workflow: top.workflow, phase: top.phase, log: top.log,
    budget, console: consoleObj, setTimeout: setTimeout_, clearTimeout: clearTimeout_,
  }
  for (const k of ObjectKeys(globals)) ObjectDefineProperty(G, k, { value: globals[k], writable: true, configurable: true, enumerable: false })

  // Final value: a JSON-style clone (functions in objects dropped, a returned function or a cycle
  // fails the run, own __proto__ keys dropped at every depth).
  function finalClone(value) {
    const stack = new SetCtor()
    function walk(v, top, depth) {
      if (v !== null && typeof v === 'object' && typeof v.toJSON === 'function') v = v.toJSON()
      if (typeof v === 'function') {
        if (top) throw new TypeErrorCtor('the workflow returned a function; a final value must be JSON-serializable')
        return undefined
      }
      if (typeof v === 'bigint') throw new TypeErrorCtor('the workflow returned a BigInt, which JSON cannot serialize')
      if (typeof v === 'symbol' || v === undefined) return undefined
      if (typeof v === 'number') return Number.isFinite(v) ? v : null
      if (v === null || typeof v !== 'object') return v
      // depth counts the containers around v: at most maxValueDepth containers in all, as for args
      if (depth >= LIMITS.maxValueDepth) {
        throw new RangeErrorCtor('the final value is nested deeper than ' + LIMITS.maxValueDepth + ' levels; flatten it')
      }
      if (apply(setHas, stack, [v])) throw new TypeErrorCtor('the workflow returned a cyclic structure (circular reference); a final value must be JSON-serializable')
      apply(setAdd, stack, [v])
      let r
      if (ArrayIsArray(v)) {
        r = []
        for (let i = 0; i < v.length; i++) { const x = walk(v[i], false, depth + 1); r.push(x === undefined ? null : x) }
      } else {
        r = ObjectCreate(null)
        for (const k of ObjectKeys(v)) {
          if (k === '__proto__') continue
          const x = walk(v[k], false, depth + 1)
          if (x !== undefined) r[k] = x
        }
      }
      apply(setDelete, stack, [v])
      return r
    }
    const r = walk(value, true, 0)
    return r === undefined ? 'null' : JSONstringify(r)
  }

  return {
    deliver(id, text) {
      const resolve = apply(mapGet, pending, [id])
      if (resolve === undefined) return
      apply(mapDelete, pending, [id])
      if (text !== null) apply(mapSet, inbox, [id, text])
      resolve(undefined)
    },
    setBudget(t, s) { total = t; spent = s },
    // Claude Code 2.1.209 (measured): import() rejects with an Error reading exactly this.
    importError() { return new ErrorCtor('import() is not available in workflow scripts.') },
    idle() { return apply(mapSize, pending, []) === 0 },
    setLimits(maxFanoutItems, profile, maxValueDepth) {
      LIMITS.maxFanoutItems = maxFanoutItems; LIMITS.profile = profile; LIMITS.maxValueDepth = maxValueDepth
    },
    setArgs(text) {
      ObjectDefineProperty(G, 'args', { value: text === null ? undefined : JSONparse(text), writable: true, configurable: true })
    },
    registerChild(token, factory) { apply(mapSet, factories, [token, factory]) },
    start(main) {
      // this at the top level of a workflow is its global object (Claude Code 2.1.332, measured)
      return apply(promiseThen, PromiseCtor.resolve(undefined), [() => apply(main, G, [])])
    },
    finish(p) {
      return apply(promiseThen, p, [
        (v) => { try { send({ t: 'done', ok: true, value: finalClone(v) }) } catch (e) { send({ t: 'done', ok: false, error: { name: 'Error', message: describe(e) } }) } },
        (e) => { send({ t: 'done', ok: false, error: { name: (e && typeof e.name === 'string') ? e.name : 'Error', message: describe(e), stack: (e && typeof e.stack === 'string') ? e.stack : '' } }) },
      ])
    },
  }
})`

// ---------------------------------------------------------------------------------------------
// Host side of the worker.
// A workflow body is compiled with vm.compileFunction, which parses it as the body of one strict
// function: no text in the body can close that function early and run code outside it (string
// concatenation into a `(async () => {…})` wrapper could be escaped, e.g. by text tree-sitter reads as
// a regular expression and V8 as a division). Inside it an async arrow carries top-level await; it is
// called with the realm's global object as `this`, so top-level `this` is the global object, as in
// Claude Code 2.1.332. Line 1 of the body is line 1 of the compiled text (lineOffset -1).
const BODY_HEAD = "'use strict'; return (async () => {\n"
const BODY_TAIL = '\n})()'
const CHILD_PARAMS = ['agent', 'parallel', 'pipeline', 'workflow', 'phase', 'log', 'args', 'budget', 'console']

// Dynamic import() (profile claude-code/2.1.209 launches files that use it; 2.1.332 refuses them at
// load, but a static scan can be fooled) rejects with an Error made *inside* the realm. Without
// this callback Node rejects with an error from the worker's own realm, whose constructor chain
// reaches the worker's Function and `process`. Node honours the callback only when the worker runs
// with --experimental-vm-modules (worker.py passes it); the rejection settles on a later host turn,
// so the realm's microtasks are flushed once more then and the deadlock check waits for it.
let importsInFlight = 0
function refuseImport() {
  importsInFlight++
  setImmediate(() => { importsInFlight--; if (!finished) guarded(() => {}) })
  throw api.importError()
}

// `params` null: the top-level workflow; else a child's factory taking the child's API.
function compile(body, filename, context, params) {
  return vm.compileFunction(BODY_HEAD + body + BODY_TAIL, params || [], {
    filename, lineOffset: -1, parsingContext: context, importModuleDynamically: refuseImport,
  })
}

// Does V8 read the whole body as the body of the workflow's async function? A body can be valid
// JavaScript and still close that function early (`return 1 }); (async () => {`), which tree-sitter
// reports as a parse error and V8 accepts. To know what V8 reads, the function is built without being
// called — `return (async () => {BODY})` — in a throwaway realm, under a short time limit: when the
// body is whole, nothing of it runs and the returned function's source text is exactly the body;
// otherwise the text after the early close ran (contained in that empty realm) and the source differs.
// Returns null, or a problem whose position is where the function closed when that can be told.
const ESCAPE_TAIL = '\n})'
const FN_HEAD = 'async () => {\n'
const functionToString = Function.prototype.toString
function escapeProblem(body) {
  const probe = vm.createContext(vm.constants.DONT_CONTEXTIFY, {
    codeGeneration: { strings: false, wasm: false }, microtaskMode: 'afterEvaluate',
  })
  const ProbeError = vm.runInContext('Error', probe)
  const fn = vm.compileFunction(BODY_HEAD + body + ESCAPE_TAIL, [], {
    parsingContext: probe,
    importModuleDynamically: () => { throw new ProbeError('import() is not available in workflow scripts.') },
  })
  Object.defineProperty(probe, '__wfmcp_probe', { value: fn })
  const expected = FN_HEAD + body + '\n}'
  let source = null
  try {
    const r = vm.runInContext('__wfmcp_probe()', probe, { timeout: 250 })
    if (typeof r === 'function' && !types.isProxy(r)) source = Reflect.apply(functionToString, r, [])
  } catch (err) { source = null }
  if (source === expected) return null
  const problem = {
    message: 'the code closes the workflow\'s body early: a `}` or `)` that V8 reads as code ends the async ' +
      'function the workflow runs in before the end of the file, and what follows would run outside it; ' +
      'check the brackets (tree-sitter and V8 may read a construct before it differently)',
    line: 1, column: 1,
  }
  if (typeof source === 'string' && source.length > FN_HEAD.length && expected.startsWith(source.slice(0, -1))) {
    const before = body.slice(0, source.length - 1 - FN_HEAD.length)
    const lines = before.split(/\r\n|[\r\n\u2028\u2029]/)
    problem.line = lines.length
    problem.column = lines[lines.length - 1].length + 1
  }
  return problem
}
let scratch = null  // a context for syntax checks: compiling there runs nothing
const scratchContext = () => scratch || (scratch = newContext())
function newContext() {
  // DONT_CONTEXTIFY: the global object is the new realm's own, with no host "sandbox" object behind
  // it (a contextified sandbox is a host-realm object, and Node hands it to global setters as their
  // receiver).
  return vm.createContext(vm.constants.DONT_CONTEXTIFY, {
    name: 'workflow', codeGeneration: { strings: false, wasm: false }, microtaskMode: 'afterEvaluate',
  })
}

// Host code never runs workflow code outside runInContext's timeout: a value workflow code may have
// made (a thrown object) is read only through own data properties, never through a getter, a Proxy
// trap or a toString.
function ownData(v, key) {
  if (v === null || (typeof v !== 'object' && typeof v !== 'function') || types.isProxy(v)) return undefined
  const d = Reflect.getOwnPropertyDescriptor(v, key)
  return d !== undefined && 'value' in d ? d.value : undefined
}
function safeText(v, key = 'message') {
  if (typeof v === 'string') return v
  if (v === null || (typeof v !== 'object' && typeof v !== 'function')) return typeof v === 'symbol' ? v.toString() : String(v)
  const text = ownData(v, key)
  return typeof text === 'string' ? text : 'a thrown ' + typeof v
}

// Only for errors of compiles in the scratch context, where no workflow code ever runs (so reading
// `stack` cannot call a workflow's Error.prepareStackTrace).
function syntaxProblem(err) {
  // V8 puts "file:LINE" and a caret line at the top of a SyntaxError's stack.
  let stack = ''
  try { stack = String(err.stack) } catch (e) { stack = '' }
  const lines = stack.split('\n')
  let line = null, column = null
  const m = /:(\d+)$/.exec(lines[0] || '')
  if (m) line = Number(m[1])
  if (lines.length > 2 && /^\s*\^+/.test(lines[2])) column = lines[2].indexOf('^') + 1
  if (line !== null && line < 1) line = 1
  let message = 'syntax error'
  try { message = String(err.message) } catch (e) { message = 'syntax error' }
  return { message, line, column }
}

let ctx = null
let api = null
let syncTimeoutMs = 30000
let profileName = ''
let cacheKeyOptions = []
const timers = new Map()
const flushScript = new vm.Script('undefined', { filename: 'workflow-mcp:flush' })
let finished = false

function fail(name, message) {
  if (finished) return
  finished = true
  out({ t: 'done', ok: false, error: { name, message } })
  setImmediate(exitSoon)
}

function guarded(fn) {
  try {
    fn()
    flushScript.runInContext(ctx, { timeout: syncTimeoutMs })
    if (!finished && api.idle() && importsInFlight === 0) {
      // Nothing is in flight (no agent call, nested workflow or timer) and the microtasks are done:
      // nothing can ever settle the promise the workflow is waiting on.
      fail('DeadlockError', 'the workflow is waiting on a promise that nothing will ever settle ' +
        '(no agent call, nested workflow or timer is pending); every awaited promise must be able to resolve')
    }
  } catch (err) {
    const msg = safeText(err)
    if (ownData(err, 'code') === 'ERR_SCRIPT_EXECUTION_TIMEOUT' || /timed out/i.test(msg)) {
      fail('TimeoutError', 'workflow JavaScript ran synchronously for more than ' + syncTimeoutMs +
        ' ms without yielding (synchronous time limit, profile ' + profileName + '); make long loops await something')
    } else {
      fail('Error', msg)
    }
  }
}

function onPost(text) {
  const msg = JSON.parse(text)
  if (msg.t === 'log') {
    msg.message = clip(msg.message, logLine.max, logLine.keep)
    // The run's log limits hold here too, so a flood of log() never piles up in this process: lines
    // past the limit (after one more, which makes the host say so) are only counted, and the count
    // crosses once, before the final value.
    if (logSent.lines > logLimit.lines || logSent.chars > logLimit.chars) { logSent.dropped++; return }
    logSent.lines++
    logSent.chars += typeof msg.message === 'string' ? msg.message.length : 0
  } else if (msg.t === 'child' && typeof msg.message === 'string') {
    msg.message = clip(msg.message, ERROR_TEXT.max, ERROR_TEXT.keep)
  } else if (msg.t === 'call' && msg.fn === 'workflow' && typeof msg.args === 'string') {
    msg.args = wellFormed(msg.args) // JSON text inside the message: out() cannot see its escapes
  } else if (msg.t === 'call' && msg.fn === 'agent') {
    if (depthOf(msg.opts, 0) > MAX_DEPTH) {
      throw new RangeError('agent() options are nested deeper than ' + MAX_DEPTH + ' levels')
    }
    const c = cell()
    const picked = {}
    let keyable = true
    for (const k of cacheKeyOptions) {
      if (!msg.opts || !Object.prototype.hasOwnProperty.call(msg.opts, k) || msg.opts[k] === undefined) continue
      if (Object.prototype.hasOwnProperty.call(TOOL_LISTS, k)) {
        const list = toolList(k, msg.opts[k])
        if (list === null) keyable = false
        else if (list.length > 0) picked[k] = list
      } else picked[k] = msg.opts[k]
    }
    const canon = JSON.stringify(sortKeys(picked))
    const key = keyable ? 'v2:' + H(c.chain, msg.prompt, canon) : ''
    if (keyable) c.chain = key
    msg.key = key
    msg.canon = canon
  } else if (msg.t === 'timer') {
    const handle = setTimeout(() => { timers.delete(msg.id); guarded(() => api.deliver(msg.id, null)) }, msg.ms)
    timers.set(msg.id, handle)
    return
  } else if (msg.t === 'clear') {
    const h = timers.get(msg.id)
    if (h !== undefined) { clearTimeout(h); timers.delete(msg.id) }
    return
  } else if (msg.t === 'done') {
    if (finished) return
    if (logSent.dropped > 0) { out({ t: 'dropped', lines: logSent.dropped }); logSent.dropped = 0 }
    if (msg.error) {
      msg.error.message = clip(msg.error.message, ERROR_TEXT.max, ERROR_TEXT.keep)
      if (typeof msg.error.stack === 'string' && msg.error.stack.length > 8000) msg.error.stack = msg.error.stack.slice(-8000)
    }
    if (typeof msg.value === 'string') msg.value = wellFormed(msg.value) // JSON text, as workflow() args
    finished = true
    out(msg)
    setImmediate(exitSoon)
    return
  }
  out(msg)
}

// Profile claude-code/2.1.209 keeps one chain for the whole run, advanced in agent() call order:
// parallel()/pipeline() neither fork nor join it (measured with the oracle, 2026-11-30). The host
// sends the profile's `flatCacheChain` in the start message.
let flatChain = false

function onFork(kind, n) {
  const parent = cell()
  const id = ++nextFork
  if (flatChain) {
    forks.set(id, { parent, kind, slots: null })
    return id
  }
  const P = parent.chain
  parent.chain = H(P, kind, 'fork')
  const slots = []
  for (let i = 0; i < n; i++) slots.push({ chain: H(P, kind, 'slot:' + i) })
  forks.set(id, { parent, kind, slots })
  return id
}
function onRunSlot(id, i, fn) {
  const f = forks.get(id)
  return chainStore.run(f.slots === null ? f.parent : f.slots[i], fn)
}
// The join hashes the parent's chain as it is at the join (normally the fork value, but calls the
// parent made while the fan-out ran have advanced it); an empty fan-out never joins, so its parent
// keeps the fork value (profile claude-code/2.1.332).
function onJoin(id) {
  const f = forks.get(id)
  if (!f) return
  forks.delete(id)
  if (f.slots === null || f.slots.length === 0) return
  f.parent.chain = H(f.parent.chain, f.kind, 'join', ...f.slots.map((s) => s.chain))
}

function start(msg) {
  syncTimeoutMs = msg.syncTimeoutMs || 30000
  profileName = msg.profile || ''
  cacheKeyOptions = msg.cacheKeyOptions || []
  flatChain = msg.flatCacheChain === true
  if (msg.logLine) logLine = { max: msg.logLine.max, keep: msg.logLine.keep }
  if (msg.logLimit) logLimit = { lines: msg.logLimit.lines, chars: msg.logLimit.chars }
  ctx = newContext()
  let main
  try {
    main = compile(msg.body, msg.filename || 'workflow.js', ctx, null)
  } catch (err) {
    const p = syntaxProblem(err)
    fail('SyntaxError', p.message + (p.line ? ' (line ' + p.line + (p.column ? ', column ' + p.column : '') + ')' : ''))
    return
  }
  api = new vm.Script(PRELUDE, { filename: 'workflow-mcp:prelude' }).runInContext(ctx)(onPost, onFork, onRunSlot, onJoin)
  MAX_DEPTH = msg.maxValueDepth || 256
  api.setLimits(msg.maxFanoutItems || 4096, profileName, MAX_DEPTH)
  api.setBudget(msg.budgetTotal === undefined ? null : msg.budgetTotal, msg.spent || 0)
  api.setArgs(msg.args === undefined ? null : msg.args)
  guarded(() => api.finish(api.start(main)))
}

// Answers to realm requests; no workflow code runs here (it runs in the flush that follows).
function answer(msg) {
  if (msg.t === 'result') return api.deliver(msg.id, JSON.stringify(msg.r))
  if (msg.t === 'child') {
    // A nested workflow's body, resolved and validated by the host.
    let factory
    try {
      compile(msg.body, msg.filename || msg.name, scratchContext(), CHILD_PARAMS)  // errors read safely
      factory = compile(msg.body, msg.filename || msg.name, ctx, CHILD_PARAMS)
    } catch (err) {
      const p = syntaxProblem(err)
      return api.deliver(msg.id, JSON.stringify({ ok: false, error: { name: 'SyntaxError', message: 'workflow ' + JSON.stringify(msg.name) + ': ' + p.message } }))
    }
    const token = 'c' + msg.id
    api.registerChild(token, factory)
    return api.deliver(msg.id, JSON.stringify({ ok: true, value: { token, name: msg.name, phase: msg.phase, args: msg.args }, spent: msg.spent }))
  }
  if (msg.t === 'budget') return api.setBudget(msg.total === undefined ? null : msg.total, msg.spent)
  return fail('ProtocolError', 'unknown answer ' + JSON.stringify(msg.t))
}

function onHost(msg) {
  switch (msg.t) {
    case 'start': return start(msg)
    case 'result':
    case 'child':
      return guarded(() => answer(msg))
    case 'batch':
      return guarded(() => { for (const item of msg.items) answer(item) })
    case 'check': {
      const results = msg.sources.map((src) => {
        try { compile(src, 'workflow.js', scratchContext(), null) } catch (err) { return syntaxProblem(err) }
        return escapeProblem(src)
      })
      return out({ t: 'checked', id: msg.id, results })
    }
    case 'collate':
      return out({ t: 'collated', id: msg.id, names: msg.names.slice().sort((a, b) => a.localeCompare(b)) })
    case 'budget':
      return api && answer(msg)
    case 'stop':
      return process.exit(0)
    default:
      return fail('ProtocolError', 'unknown host message ' + JSON.stringify(msg.t))
  }
}

// A rejection the workflow handles later (or never) is the workflow's business, not a crash.
process.on('unhandledRejection', () => {})
process.on('uncaughtException', (err) => fail('Error', 'realm worker error: ' + safeText(err, 'stack')))
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
rl.on('line', (line) => {
  if (!line) return
  let msg
  try { msg = JSON.parse(line) } catch (e) { return fail('ProtocolError', 'host sent a line that is not JSON') }
  onHost(msg)
})
rl.on('close', () => process.exit(0))
out({ t: 'hello', protocol: PROTOCOL, node: process.versions.node })
