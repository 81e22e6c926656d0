'use strict'
// workflow-mcp realm worker: runs one workflow body in a restricted V8 context.
//
// The host (Python) and this process talk in JSON lines over stdio (protocol version 2, see
// messages.py). Nothing from this file's realm is ever handed to workflow code: every global the
// workflow sees is created by PRELUDE inside the context, and values cross as JSON strings that the
// realm parses itself. A nested workflow() child runs in a realm of its own (as in Claude Code), and
// values pass between two realms only through PRELUDE's boundary copy. All workflow code (the body,
// promise continuations, timer callbacks) runs inside `runInContext(..., {timeout})` calls, so the
// synchronous limit also holds after an await. Node's vm is not a security boundary; see the
// README's security section.

const vm = require('node:vm')
const crypto = require('node:crypto')
const readline = require('node:readline')
const { types } = require('node:util')
const v8 = require('node:v8')
const { AsyncLocalStorage } = require('node:async_hooks')

const PROTOCOL = 4
// Output is buffered and written once per turn of Node's event loop: a fan-out of 1,000 agent()
// calls becomes one write, not 1,000.
let outBuf = []
let tookBuf = []            // replayed calls this realm answers itself, not yet announced
let tookChars = 0
const TOOK_CHARS = 1 << 20
const flushTook = () => { const calls = tookBuf; tookBuf = []; tookChars = 0; out({ t: 'took', calls }) }
const flushOut = () => { if (tookBuf.length > 0) flushTook(); if (outBuf.length) { const text = outBuf.join(''); outBuf = []; process.stdout.write(text) } }
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
        : msg.t === 'call' ? 'this workflow() call' : 'a ' + JSON.stringify(String(msg.t)) + ' message'
  const fix = msg.t === 'done' ? 'return less (let agents write large data to files and return their paths)'
    : 'pass less data (let agents read large inputs from files)'
  const err = new RangeError(what + ' is ' + MB(size) + ' as a realm message; the realm passes at most ' +
    MB(MAX_MESSAGE) + ' per message (workflow-mcp limit); ' + fix)
  err.code = SIZE_ERROR
  return err
}
const tooLarge = (line) => line.length * 3 > MAX_MESSAGE && Buffer.byteLength(line) > MAX_MESSAGE
const out = (msg) => {
  if (tookBuf.length > 0 && msg.t !== 'took') flushTook() // what came before goes first
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
  // A long synchronous stretch (a fan-out making its calls, a replay answering them) sends as it
  // goes, so the host works on the first messages while this realm makes the rest.
  if (outBuf.length >= OUT_CHUNK) flushOut()
}
const OUT_CHUNK = 128

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
// The realm. PRELUDE is evaluated inside each context (the top-level workflow's, and one per nested
// workflow() child) and returns that realm's API to this file. Nothing in it may hand workflow code a
// value made outside its context: host functions are called through `guard`, whose errors are rebuilt
// here, and everything the host passes in is a primitive, JSON text, or an object another realm made.
const PRELUDE = String.raw`(function (hostPost, hostFork, runSlot, hostJoin, hostSpent, hostEnd, hostDrain, hostStack, cfg) {
  'use strict'
  const G = globalThis
  const JSONparse = JSON.parse, JSONstringify = JSON.stringify
  const ObjectFreeze = Object.freeze, ObjectCreate = Object.create, ObjectKeys = Object.keys
  const ObjectDefineProperty = Object.defineProperty, ObjectGetPrototypeOf = Object.getPrototypeOf
  const ArrayIsArray = Array.isArray, PromiseCtor = Promise, StringCtor = String, NumberCtor = Number
  const NumberIsFinite = Number.isFinite
  const promiseThen = Promise.prototype.then
  const MapCtor = Map, SetCtor = Set, WeakSetCtor = WeakSet
  const ErrorCtor = Error, TypeErrorCtor = TypeError, RangeErrorCtor = RangeError
  const mapGet = Map.prototype.get, mapSet = Map.prototype.set, mapDelete = Map.prototype.delete
  const mapHas = Map.prototype.has
  const setAdd = Set.prototype.add, setHas = Set.prototype.has, setDelete = Set.prototype.delete
  const wsAdd = WeakSet.prototype.add, wsHas = WeakSet.prototype.has
  const strSlice = String.prototype.slice, strTrim = String.prototype.trim
  const strCode = String.prototype.charCodeAt, strIndexOf = String.prototype.indexOf
  const strSplit = String.prototype.split, strStarts = String.prototype.startsWith
  const apply = Reflect.apply
  const ws = (s, v) => apply(wsAdd, s, [v]), wsh = (s, v) => apply(wsHas, s, [v])
  const reject = (e) => PromiseCtor.reject(e)
  const never = () => new PromiseCtor(() => {})

  // This realm's configuration: primitives only (cfg itself is the host's and is not kept).
  const CHILD = cfg.childName === null ? null : { name: '' + cfg.childName, phase: '' + cfg.childPhase }
  const PROFILE = '' + cfg.profile
  const MAX_ARRAY = +cfg.maxArray, CHILD_DEPTH = +cfg.childDepth, FINAL_DEPTH = +cfg.finalDepth
  const HOST_DEPTH = +cfg.hostDepth
  const CHILD_MESSAGE_IS_STACK = cfg.childErrorMessageIsStack === true
  const FANOUT_DEFERRED = cfg.fanoutStartDeferred !== false
  const TOTAL = cfg.budgetTotal === null ? null : +cfg.budgetTotal
  let returned = cfg.returned === true

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
  const spentNow = guard(hostSpent), end = guard(hostEnd), drain = guard(hostDrain), stackAt = guard(hostStack)

  // Determinism (profile claude-code/2.1.332): Date.now(), argless Date()/new Date() and
  // Math.random() throw; they would make resume identity depend on the wall clock.
  const RealDate = Date
  const nondeterministic = (what) => new ErrorCtor(what + ' is not available in workflows: results must ' +
    'replay identically on resume. Pass a timestamp or a seed through args instead.')
  // Date.now itself is replaced (not intercepted by a get trap), so the proxy keeps its invariants
  // once the intrinsics are frozen below.
  const SafeDate = new Proxy(RealDate, {
    apply(target, self, argv) { throw nondeterministic('Date()') },
    construct(target, argv, nt) {
      if (argv.length === 0) throw nondeterministic('new Date()')
      return Reflect.construct(target, argv, nt)
    },
  })
  ObjectDefineProperty(RealDate, 'now', { value: { now() { throw nondeterministic('Date.now()') } }.now, writable: true, configurable: true })
  ObjectDefineProperty(RealDate.prototype, 'constructor', { value: SafeDate, writable: true, configurable: true })
  G.Date = SafeDate
  ObjectDefineProperty(Math, 'random', { value: { random() { throw nondeterministic('Math.random()') } }.random, writable: true, configurable: true })
  delete G.WebAssembly
  for (const n of ['SharedArrayBuffer', 'WeakRef', 'FinalizationRegistry', 'Atomics']) delete G[n]

  // The intrinsics are frozen, as in Claude Code (measured 2.1.332 and 2.1.209, realm-intrinsics-frozen):
  // every global constructor (Object, Array, Promise, Error, Proxy, the typed arrays, ...) and its
  // prototype, the namespaces Math, JSON, Reflect and Intl with the constructors inside Intl, and the
  // intrinsics no global names (AsyncFunction, the generator functions, %TypedArray%, the iterator
  // prototypes). Methods (Math.max, Array.prototype.map, parseInt) and the global object are not, so
  // an assignment to a built-in prototype or namespace throws a TypeError (strict mode) while a
  // property added to a method or the global object works. A few inherited properties stay
  // overridable on inheriting objects (realm-intrinsics-override): each becomes a non-enumerable,
  // non-configurable accessor whose getter returns the original and whose setter defines an own data
  // property on the receiver (a TypeError if the receiver is not extensible; on the prototype itself
  // the assignment is ignored).
  {
    const getOwn = Object.getOwnPropertyDescriptor, ownKeys = Reflect.ownKeys, isExtensible = Object.isExtensible
    const tame = (home, keys) => {
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i]
        const d = getOwn(home, key)
        if (d === undefined || !('value' in d)) continue
        const value = d.value
        const accessors = {
          get() { return value },
          set(v) {
            if (this === home) return
            if (!isExtensible(this)) throw new TypeErrorCtor('Cannot assign to read only property ' + StringCtor(key) + ' of object')
            ObjectDefineProperty(this, key, { value: v, writable: true, enumerable: true, configurable: true })
          },
        }
        ObjectDefineProperty(home, key, { get: accessors.get, set: accessors.set, enumerable: false, configurable: false })
      }
    }
    const errorKeys = ['name', 'message', 'constructor']
    tame(Object.prototype, ['toString', 'toLocaleString', 'valueOf', 'hasOwnProperty', 'propertyIsEnumerable',
      'isPrototypeOf', '__defineGetter__', '__defineSetter__', '__lookupGetter__', '__lookupSetter__', 'constructor'])
    tame(Array.prototype, ['toString', 'constructor'])
    tame(Function.prototype, ['length', 'name', 'toString', 'constructor'])
    tame(Error.prototype, ['toString', 'name', 'message', 'constructor'])
    for (const E of [TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError, AggregateError]) tame(E.prototype, errorKeys)
    tame(RealDate.prototype, ['toString', 'toLocaleString', 'valueOf', 'constructor'])
    if (typeof Iterator === 'function') tame(Iterator.prototype, ['constructor', Symbol.toStringTag])

    // Only built-ins are here (no workflow code has run): those with a prototype, and Proxy, are the
    // constructors. (Reflect.construct with a throw for every other function costs ~1 ms a realm.)
    const isConstructor = (f) => f.prototype !== undefined || f === Proxy
    const hard = []
    const both = (f) => { if (f !== null && (typeof f === 'object' || typeof f === 'function')) { hard.push(f); const p = f.prototype; if (p !== null && (typeof p === 'object' || typeof p === 'function')) hard.push(p) } }
    const gkeys = ownKeys(G)
    for (let i = 0; i < gkeys.length; i++) {
      const d = getOwn(G, gkeys[i])
      if (!('value' in d)) continue
      const v = d.value
      if (typeof v === 'function' ? isConstructor(v) : (v !== null && typeof v === 'object' && v !== G)) both(v)
      if (v !== null && typeof v === 'object' && v !== G) {
        const inner = ownKeys(v)
        for (let j = 0; j < inner.length; j++) {
          const dd = getOwn(v, inner[j])
          if ('value' in dd && typeof dd.value === 'function' && isConstructor(dd.value)) both(dd.value)
        }
      }
    }
    const protoOf = (x) => { try { return ObjectGetPrototypeOf(x) } catch (e) { return null } }
    both(protoOf(async function () {}).constructor)
    both(protoOf(function* () {}).constructor)
    both(protoOf(async function* () {}).constructor)
    hard.push(protoOf(function* () {}).prototype, protoOf(async function* () {}).prototype)
    hard.push(protoOf(protoOf(async function* () {}).prototype))
    both(protoOf(Uint8Array))
    hard.push(protoOf([][Symbol.iterator]()), protoOf(new MapCtor().entries()), protoOf(new SetCtor().values()),
      protoOf(''[Symbol.iterator]()), protoOf(/a/[Symbol.matchAll]('')))
    if (typeof Iterator === 'function') {
      if (typeof Iterator.from === 'function') hard.push(protoOf(Iterator.from({ next() { return { done: true } } })))
      if (typeof Iterator.prototype.map === 'function') hard.push(protoOf([].values().map((x) => x)))
    }
    // %SegmentsPrototype% and %SegmentIteratorPrototype% are reached only through a segments object,
    // and making the first one loads ICU's break iterators (~17 ms a process): they are frozen when
    // segment() first makes one, before workflow code can hold it.
    if (typeof Intl === 'object' && typeof Intl.Segmenter === 'function') {
      const home = Intl.Segmenter.prototype
      const realSegment = home.segment
      let frozen = false
      const segment = ({ segment(input) {
        const segments = apply(realSegment, this, [input])
        if (!frozen) {
          frozen = true
          const proto = protoOf(segments)
          const iterator = apply(proto[Symbol.iterator], segments, [])
          ObjectFreeze(proto)
          ObjectFreeze(protoOf(iterator))
        }
        return segments
      } }).segment
      ObjectDefineProperty(home, 'segment', { value: segment, writable: true, enumerable: false, configurable: true })
    }
    for (let i = 0; i < hard.length; i++) if (hard[i] !== null && hard[i] !== undefined) ObjectFreeze(hard[i])
  }

  let seq = 0
  const pending = new MapCtor()       // id -> resolve (agent() calls, timers)
  const inbox = new MapCtor()          // id -> JSON text of the outcome
  const childCalls = new MapCtor()     // id -> { resolve, reject, has, args } (workflow() calls)
  const budgetErrors = new WeakSetCtor()

  // JSON to the host; a BigInt (in agent() options: JSON has none) crosses as its digits, so String()
  // coercions see the same text. Tried without the replacer first: it slows every value down.
  const bigints = (k, v) => typeof v === 'bigint' ? StringCtor(v) : v
  // The message itself is a null-prototype copy: an Object.prototype.toJSON the workflow defines
  // cannot rewrite it (the host checks every message's fields as well).
  const send = (msg) => {
    const clean = ObjectCreate(null)
    const keys = ObjectKeys(msg)
    for (let i = 0; i < keys.length; i++) clean[keys[i]] = msg[keys[i]]
    let text
    try { text = JSONstringify(clean) } catch (e) { if (!(e instanceof TypeErrorCtor)) throw e; text = JSONstringify(clean, bigints) }
    post(text)
  }
  const coerce = (v) => (v !== null && (typeof v === 'object' || typeof v === 'function')) ? '[' + typeof v + ']' : StringCtor(v)

  // -------------------------------------------------------------------------------------------
  // Errors the host throws into workflow code, shaped as Claude Code 2.1.332 delivers them
  // (measured, errors-host-error-shape): a null-prototype object with own enumerable name, message,
  // stack and toString (String(e) is 'name: message'), so 'e instanceof Error' is false. The stack
  // is the first line and the workflow's own frames (the file is always workflow.js).
  function hostError(name, message, frames) {
    const e = ObjectCreate(null)
    e.name = name
    e.message = message
    e.stack = (message === '' ? name : name + ': ' + message) + (frames || '')
    e.toString = function toString() { return e.name + ': ' + e.message }
    return e
  }
  // Where the workflow is: its frames when an error is made synchronously in a call (fn and what it
  // called hidden), or, in an async continuation, the awaiting workflow functions (V8's async stack
  // frames, "at async ... workflow.js:L:C", behind the host's own frames: hence the higher limit).
  // Captured only when an error is made, so a call costs nothing for it.
  // The realm's Error is frozen (its stackTraceLimit 10, as in Claude Code), so the host captures the
  // stack, with a limit of its own; what comes back is text.
  function callSite(fn, limit) {
    let stack = ''
    try { stack = stackAt(fn, limit) } catch (x) {}
    return { stack }
  }
  const hereFrames = (fn) => framesOf(callSite(fn, 10))
  const awaitFrames = () => framesOf(callSite(undefined, 64))
  function frameLines(text, from) {
    let out = ''
    const lines = apply(strSplit, text, ['\n'])
    for (let i = from; i < lines.length; i++) {
      const line = lines[i]
      if (apply(strStarts, line, ['    at ']) && apply(strIndexOf, line, ['workflow.js:']) !== -1) out += '\n' + line
    }
    return out
  }
  function framesOf(site) {
    let s
    try { s = site.stack } catch (x) { return '' }
    return typeof s === 'string' ? frameLines(s, 1) : ''
  }
  // An error's stack as it leaves its realm: its message lines, then only workflow frames.
  function cleanStack(s) {
    const lines = apply(strSplit, s, ['\n'])
    let head = '', i = 0
    for (; i < lines.length && !apply(strStarts, lines[i], ['    at ']); i++) head += (i ? '\n' : '') + lines[i]
    return head + frameLines(s, i)
  }
  // The boundary's own errors always fail the copy; anything else that throws while one value is
  // copied only loses that value (measured).
  const boundaryErrors = new WeakSetCtor(), arrayBound = new WeakSetCtor()
  const arrayError = (n, frames) => {
    const e = hostError('Error', 'array length ' + n + ' exceeds the maximum of ' + MAX_ARRAY + ' supported across the workflow VM boundary', frames)
    ws(boundaryErrors, e)
    ws(arrayBound, e)
    return e
  }
  const depthError = (max) => { const e = hostError('Error', 'nesting deeper than ' + max + ' levels is not supported'); ws(boundaryErrors, e); return e }
  // An error thrown into workflow code by a call: the host's shape, whatever threw it.
  const asHostError = (e) => {
    if (e !== null && typeof e === 'object' && ObjectGetPrototypeOf(e) === null) return e
    const w = wrapThrown(e)
    return hostError(w.name, w.message)
  }

  // A thrown value as Claude Code 2.1.332 reports it (measured, errors-child-throw-values and
  // errors-failed-run-thrown-*): an object's name and message when they are strings (an Error's
  // own or inherited), a string or number as the message, anything else an empty message; name
  // 'Error' by default. The stack is the error's own (workflow frames only) or 'name: message'.
  function wrapThrown(e) {
    let name = 'Error', message = '', stack
    if (e !== null && (typeof e === 'object' || typeof e === 'function')) {
      try { const n = e.name; if (typeof n === 'string') name = n } catch (x) {}
      try { const m = e.message; if (typeof m === 'string') message = m } catch (x) {}
      try { const s = e.stack; if (typeof s === 'string') stack = cleanStack(s) } catch (x) {}
    } else if (typeof e === 'string') {
      message = e
    } else if (typeof e === 'number' || typeof e === 'boolean' || typeof e === 'bigint') {
      message = StringCtor(e)
    }
    if (stack === undefined) stack = message === '' ? name : name + ': ' + message
    return { name, message, stack }
  }

  // -------------------------------------------------------------------------------------------
  // The VM-boundary copy of Claude Code 2.1.332 (measured; NOTES.md#boundary): own enumerable
  // string-keyed data into fresh objects and arrays of this realm. Getters are read (one that throws
  // drops its key), functions are dropped (undefined in arrays), holes become undefined, __proto__
  // keys are dropped, toJSON is never called; primitives stay as they are (Symbols, BigInts, -0,
  // NaN, undefined); cycles and shared references stay. Date, Map, RegExp, Error... have no own
  // enumerable keys, so they become {}. An array longer than MAX_ARRAY or nesting deeper than
  // maxDepth objects fails with Claude's messages. Other failures (measured, NOTES.md#boundary): an
  // object whose keys cannot be listed (a Proxy whose ownKeys throws) copies as {}; a value that
  // cannot be copied (a revoked Proxy, a length that throws) drops its key (undefined in an array);
  // at the root it fails the copy. Iterative: 100,000 levels need no deep stack.
  // Plain assignment (defineProperty is 20 times slower): only a setter the workflow itself put on
  // its realm's Object or Array prototype could intercept it, in a copy of its own data; '__proto__',
  // the one key assignment would not create, is dropped anyway.
  const put = (o, k, v) => { o[k] = v }
  let copyDepth = 0 // the deepest nesting the last boundaryCopy met
  function copyShell(src, depth, maxDepth, seen, work) {
    if (depth > maxDepth) throw depthError(maxDepth)
    if (depth > copyDepth) copyDepth = depth
    let dst, keys, n
    if (ArrayIsArray(src)) {
      n = src.length
      if (n > MAX_ARRAY) throw arrayError(n)
      dst = []; keys = null
    } else {
      try { keys = ObjectKeys(src) } catch (x) { keys = [] }
      n = keys.length; dst = {}
    }
    apply(mapSet, seen, [src, dst])
    work[work.length] = { src, dst, keys, n, i: 0, depth }
    return dst
  }
  function boundaryCopy(value, maxDepth) {
    copyDepth = 0
    if (typeof value === 'function') return undefined
    if (value === null || typeof value !== 'object') return value
    const seen = new MapCtor()
    const work = []
    const root = copyShell(value, 1, maxDepth, seen, work)
    while (work.length > 0) {
      const f = work[work.length - 1]
      if (f.i >= f.n) { work.length--; continue }
      const i = f.i++
      let k = i, v
      if (f.keys === null) {
        try { v = f.src[i] } catch (x) { v = undefined }
        if (typeof v === 'function') v = undefined
      } else {
        k = f.keys[i]
        if (k === '__proto__') continue
        try { v = f.src[k] } catch (x) { continue }
        if (typeof v === 'function') continue
      }
      if (v !== null && typeof v === 'object') {
        const known = apply(mapGet, seen, [v])
        if (known !== undefined) v = known
        else {
          try { v = copyShell(v, f.depth + 1, maxDepth, seen, work) } catch (e) {
            if (e !== null && typeof e === 'object' && wsh(boundaryErrors, e)) throw e
            if (f.keys !== null) continue
            v = undefined
          }
        }
      }
      put(f.dst, k, v)
    }
    return root
  }
  // The same bound on a value parsed from the host's JSON (a structured agent result).
  function checkArrays(value) {
    const work = [value]
    while (work.length > 0) {
      const v = work[work.length - 1]; work.length--
      if (v === null || typeof v !== 'object') continue
      if (ArrayIsArray(v)) {
        if (v.length > MAX_ARRAY) throw arrayError(v.length)
        for (let i = 0; i < v.length; i++) work[work.length] = v[i]
      } else {
        const keys = ObjectKeys(v)
        for (let i = 0; i < keys.length; i++) work[work.length] = v[keys[i]]
      }
    }
  }

  // JSON of a boundary copy (plain data), written here so no toJSON, prototype or replacer of the
  // workflow's runs: NaN/±Infinity -> null, -0 -> 0, undefined/symbols dropped from objects and null
  // in arrays; a BigInt or a cycle throws Claude's TypeErrors. Deeper than maxDepth throws
  // tooDeep() (the host reads at most HOST_DEPTH levels).
  function toJson(value, maxDepth, tooDeep) {
    const path = new SetCtor()
    const ser = (v, depth) => {
      switch (typeof v) {
        case 'string': return JSONstringify(v)
        case 'number': return NumberIsFinite(v) ? JSONstringify(v) : 'null'
        case 'boolean': return v ? 'true' : 'false'
        case 'bigint': throw hostError('TypeError', 'JSON.stringify cannot serialize BigInt.')
        case 'object': break
        default: return undefined
      }
      if (v === null) return 'null'
      if (depth > maxDepth) throw tooDeep()
      if (apply(setHas, path, [v])) throw hostError('TypeError', 'JSON.stringify cannot serialize cyclic structures.')
      apply(setAdd, path, [v])
      let out
      if (ArrayIsArray(v)) {
        out = '['
        for (let i = 0; i < v.length; i++) { const x = ser(v[i], depth + 1); out += (i ? ',' : '') + (x === undefined ? 'null' : x) }
        out += ']'
      } else {
        out = '{'
        const keys = ObjectKeys(v)
        let first = true
        for (let i = 0; i < keys.length; i++) {
          const x = ser(v[keys[i]], depth + 1)
          if (x === undefined) continue
          out += (first ? '' : ',') + JSONstringify(keys[i]) + ':' + x
          first = false
        }
        out += '}'
      }
      apply(setDelete, path, [v])
      return out
    }
    return ser(value, 1)
  }
  // The final value: a top-level Symbol or function cannot be cloned (DataCloneError, measured);
  // otherwise the boundary copy (28,000 levels) as JSON, at most HOST_DEPTH levels deep (our bound:
  // the host, the store and MCP read the value as JSON). undefined is null.
  function finalJson(v) {
    if (typeof v === 'symbol' || typeof v === 'function') throw hostError('DataCloneError', 'The object can not be cloned.')
    const text = toJson(boundaryCopy(v, FINAL_DEPTH), HOST_DEPTH, () => new RangeErrorCtor('the final value is nested ' +
      'deeper than ' + HOST_DEPTH + ' levels, the most workflow-mcp stores (Claude Code allows ' + FINAL_DEPTH + '); flatten it'))
    return text === undefined ? 'null' : text
  }
  // -------------------------------------------------------------------------------------------
  // Labels (measured, label-*): an explicit label is String() of its copied value with every
  // whitespace run made one space, trimmed, never cut; null/undefined fall back to the prompt's
  // first 60 UTF-16 units, less a trailing lone high surrogate, collapsed the same way.
  // Whitespace is JavaScript's \s; no RegExp runs, so nothing the workflow patched is called.
  const isSpace = (c) => c === 32 || (c >= 9 && c <= 13) || c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff
  function collapse(s) {
    // Most labels need nothing: no leading, trailing or repeated space and no other whitespace.
    let plain = s.length > 0 && !isSpace(apply(strCode, s, [0])) && !isSpace(apply(strCode, s, [s.length - 1]))
    for (let i = 1; plain && i < s.length; i++) {
      const c = apply(strCode, s, [i])
      if (isSpace(c) && (c !== 32 || apply(strCode, s, [i - 1]) === 32)) plain = false
    }
    if (plain) return s
    let out = '', run = false
    for (let i = 0; i < s.length; i++) {
      const c = apply(strCode, s, [i])
      if (isSpace(c)) { run = true; continue }
      if (run) { out += ' '; run = false }
      out += s[i]
    }
    if (run) out += ' '
    return apply(strTrim, out, [])
  }
  function labelOf(opts, text) {
    const l = opts.label
    if (l !== undefined && l !== null) return collapse(StringCtor(l))
    let cut = apply(strSlice, text, [0, 60])
    if (cut.length === 60) { const c = apply(strCode, cut, [59]); if (c >= 0xd800 && c <= 0xdbff) cut = apply(strSlice, cut, [0, 59]) }
    return collapse(cut)
  }

  // -------------------------------------------------------------------------------------------
  // A host request: the message is posted at the call; the promise settles in a microtask, under the
  // synchronous limit. An async function, so a rejection made here names the awaiting workflow code.
  async function request(msg) {
    const id = ++seq
    msg.id = id
    const gate = new PromiseCtor((resolve) => { apply(mapSet, pending, [id, resolve]) })
    try { send(msg) } catch (e) {
      // Nothing was sent (e.g. the message is too large): nothing will answer, so nothing waits.
      apply(mapDelete, pending, [id])
      throw e
    }
    await gate
    const text = apply(mapGet, inbox, [id]); apply(mapDelete, inbox, [id])
    const r = JSONparse(text)
    if (r.ok) {
      const v = r.value
      // Claude checks a structured result's arrays after the provider answered (measured).
      if (v !== null && typeof v === 'object') checkArrays(v)
      return v
    }
    throw makeError(r.error, awaitFrames())
  }
  function makeError(e, frames) {
    const err = hostError(typeof e.name === 'string' ? e.name : 'Error', typeof e.message === 'string' ? e.message : '', frames)
    if (e.code === 'budget_exceeded') ws(budgetErrors, err)
    return err
  }

  // budget (measured, realm-budget-shape): frozen, null prototype, total a data property; spent()
  // reads the run's spending, which the host keeps for every realm of the run.
  const budget = ObjectCreate(null)
  ObjectDefineProperty(budget, 'total', { value: TOTAL, enumerable: true })
  // methods: no prototype, not constructors (measured 2.1.332, realm-intrinsics-frozen)
  budget.spent = ({ spent() { return spentNow() } }).spent
  budget.remaining = ({ remaining() { const s = spentNow(); return TOTAL === null ? Infinity : (TOTAL - s > 0 ? TOTAL - s : 0) } }).remaining
  ObjectFreeze(budget)

  // console.* (measured, realm-console-formatting*): strings as they are, functions as their source;
  // anything else as JSON of its final-value copy, except that an object whose copy has no keys
  // prints String(value) ('{}' when that is '[object Object]' or throws); JSON that gives nothing
  // prints '', JSON that fails '[typeof]'. No %-formats. warn and error are tagged.
  function consoleText(v) {
    if (typeof v === 'string') return v
    if (typeof v === 'function') { try { return StringCtor(v) } catch (x) { return '[function]' } }
    let copy
    try { copy = boundaryCopy(v, FINAL_DEPTH) } catch (x) {
      if (x !== null && typeof x === 'object' && wsh(arrayBound, x)) return '[' + typeof v + ': array exceeds the ' + MAX_ARRAY + '-element logging cap]'
      return '[' + typeof v + ']'
    }
    if (copy !== null && typeof copy === 'object' && !ArrayIsArray(copy) && ObjectKeys(copy).length === 0) {
      let s
      try { s = StringCtor(v) } catch (x) { return '{}' }
      return s === '[object Object]' ? '{}' : s
    }
    try {
      const j = toJson(copy, FINAL_DEPTH, () => new RangeErrorCtor('too deep'))
      return j === undefined ? '' : j
    } catch (x) { return '[' + typeof v + ']' }
  }
  function makeConsole(child) {
    const c = ObjectCreate(null)
    for (const level of ['log', 'info', 'warn', 'error', 'debug']) {
      const tag = level === 'warn' || level === 'error' ? '[' + level + '] ' : ''
      // a method: no prototype, not a constructor (measured 2.1.332)
      c[level] = ({ [level](...argv) {
        let text = ''
        for (let i = 0; i < argv.length; i++) text += (i ? ' ' : '') + consoleText(argv[i])
        send({ t: 'log', message: tag + text, child })
      } })[level]
    }
    return ObjectFreeze(c)
  }

  // Timers (measured, realm-settimeout-*): the callback is called with no arguments and 'this'
  // undefined; the delay is Number(ms), NaN and negative meaning 0; a callback that is not a
  // function is accepted and never runs; an exception in the callback is swallowed. The callback
  // runs as a promise reaction, so it runs under the synchronous limit too.
  const timers = new MapCtor()
  function setTimeout_(fn, ms) {
    const id = ++seq
    let delay = NumberCtor(ms)
    if (!(delay > 0)) delay = 0
    const gate = new PromiseCtor((resolve) => { apply(mapSet, pending, [id, resolve]) })
    apply(mapSet, timers, [id, true])
    apply(promiseThen, gate, [() => {
      if (!apply(mapHas, timers, [id])) return
      apply(mapDelete, timers, [id])
      if (typeof fn === 'function') apply(fn, undefined, [])
    }])
    send({ t: 'timer', id, ms: delay })
    return id
  }
  // clearTimeout reads a string handle as Number(handle) ('3', '03', ' 3', '3.0' and '0x3' clear timer
  // 3) and ignores every other non-number: a boxed Number, an object with valueOf or toString, an
  // array, a BigInt, a Symbol (measured 2.1.332, realm-cleartimeout-handle-coercion).
  function clearTimeout_(handle) {
    const id = typeof handle === 'string' ? NumberCtor(handle) : handle
    if (apply(mapHas, timers, [id])) {
      apply(mapDelete, timers, [id])
      apply(mapDelete, pending, [id])
      send({ t: 'clear', id })
    }
  }

  // -------------------------------------------------------------------------------------------
  let currentPhase = null
  const EMPTY = ObjectFreeze(ObjectCreate(null))
  // String() of an option's copied value (agentType, phase); a copy whose String() throws (an own
  // toString that is not a function) reads as a plain object's.
  function optionText(v) {
    try { return StringCtor(v) } catch (e) { return '[object Object]' }
  }
  function agent(prompt, options) {
    const text = coerce(prompt)
    let opts
    // Options are read from their boundary copy (measured, boundary-agent-options-copied).
    try { opts = options !== null && typeof options === 'object' ? boundaryCopy(options, CHILD_DEPTH) : EMPTY } catch (e) { return reject(asHostError(e)) }
    // Options that are not a plain object carry no option (measured 2.1.332, agent-options-not-an-object:
    // a string, number, boolean, function, Symbol or array runs as a call without options); an array
    // still crosses the copy first, so its 4,096-entry bound holds.
    if (ArrayIsArray(opts)) opts = EMPTY
    const label = labelOf(opts, text)
    // An explicit phase is String() of the copy's value, never trimmed (measured 2.1.332,
    // agent-phase-option-coercion: 42 -> '42', {} -> '[object Object]', ['a', 'b'] -> 'a,b',
    // Symbol('s') -> 'Symbol(s)'); null and undefined (a function, dropped by the copy) mean none.
    const phaseTitle = CHILD !== null ? CHILD.phase
      : (opts.phase !== undefined && opts.phase !== null ? optionText(opts.phase) : currentPhase)
    // After the workflow returned, a call is never dispatched (measured: Claude drops it).
    if (returned) return never()
    // The options cross to the host as JSON of the copy; the host reads at most HOST_DEPTH levels.
    if (copyDepth > HOST_DEPTH) return reject(new RangeErrorCtor('agent() options are nested deeper than ' + HOST_DEPTH + ' levels'))
    const call = { t: 'call', fn: 'agent', prompt: text, opts, label, phase: phaseTitle, child: CHILD && CHILD.name }
    // The host looks agentType up as String() of the options' copy (Claude Code 2.1.332, measured).
    if (opts.agentType !== undefined && opts.agentType !== null) call.agentType = optionText(opts.agentType)
    return request(call)
  }
  function phase(title) {
    if (CHILD !== null) return undefined
    const t = coerce(title)
    currentPhase = t
    send({ t: 'phase', title: t })
    return undefined
  }
  function log(value) {
    send({ t: 'log', message: coerce(value), child: CHILD && CHILD.name })
    return undefined
  }
  // workflow(): the args stay in the realm; once the child is resolved its realm copies them into
  // its own objects (measured: after the running line, before the body; a failed copy fails the child).
  function workflow(target, childArgs) {
    if (CHILD !== null) {
      return reject(hostError('Error', 'workflow() cannot be called from within a child workflow — nesting is ' +
        'limited to one level. Inline the inner script or call its agents directly.', hereFrames(workflow)))
    }
    let t
    if (typeof target === 'string') t = { name: target }
    else if (target !== null && typeof target === 'object') { const p = target.scriptPath; if (typeof p === 'string') t = { scriptPath: p } }
    if (t === undefined) return reject(hostError('TypeError', 'workflow() expects a workflow name (string) or {scriptPath: string}', hereFrames(workflow)))
    if (returned) return never()
    const id = ++seq
    const done = new PromiseCtor((resolve, rejectDone) => {
      apply(mapSet, childCalls, [id, { resolve, reject: rejectDone, has: childArgs !== undefined, args: childArgs }])
    })
    try { send({ t: 'call', fn: 'workflow', target: t, id }) } catch (e) { apply(mapDelete, childCalls, [id]); return reject(e) }
    return childOutcome(done)
  }
  // A refused workflow() call (not found, unreadable) is made a host error here, where the awaiting
  // workflow code is on the async stack; a child's own throw arrives already wrapped.
  const refusals = new WeakSetCtor()
  async function childOutcome(done) {
    try { return await done } catch (e) {
      if (e !== null && typeof e === 'object' && wsh(refusals, e)) throw makeError(e, awaitFrames())
      throw e
    }
  }

  // -------------------------------------------------------------------------------------------
  // parallel() and pipeline() take their array across the boundary: more than MAX_ARRAY entries
  // fail with the boundary error; the messages are Claude Code 2.1.332's (errors-host-error-messages).
  function fanoutArray(kind, items, fn) {
    if (!ArrayIsArray(items)) {
      throw hostError('TypeError', kind === 'parallel' ? 'parallel() expects an array of functions'
        : 'pipeline() expects an array as the first argument', hereFrames(fn))
    }
    const n = items.length
    if (n > MAX_ARRAY) throw arrayError(n, hereFrames(fn))
    const out = []
    for (let i = 0; i < n; i++) put(out, i, items[i])
    return out
  }
  // A failed slot logs '<kind>[i] failed: <message>' at the join, in slot order (measured,
  // errors-fanout-slot-log-lines, errors-slot-logs-at-join): a thrown string as it is, else a
  // string 'message', else '<non-string error>'. Lines about a child's fan-out carry its name.
  function slotText(err) {
    if (typeof err === 'string') return err
    if (err !== null && (typeof err === 'object' || typeof err === 'function')) {
      try { const m = err.message; if (typeof m === 'string') return m } catch (x) {}
    }
    return '<non-string error>'
  }
  // A fan-out's slots start together as a 0 ms timer made at the call would fire (measured 2.1.332,
  // fanout-start-deferred): never inside the call, not after any number of microtasks, but after a
  // setTimeout(fn, 0) made before the call and before one made after it. The timer is the realm's
  // own: clearTimeout cannot reach it.
  function defer(fn) {
    const id = ++seq
    const gate = new PromiseCtor((resolve) => { apply(mapSet, pending, [id, resolve]) })
    apply(promiseThen, gate, [fn])
    send({ t: 'timer', id, ms: 0 })
  }
  function settleSlots(kind, forkId, runners) {
    const child = CHILD && CHILD.name
    return new PromiseCtor((resolveAll, rejectAll) => {
      const n = runners.length
      if (n === 0) { join(forkId); resolveAll([]); return }
      // 2.1.209 starts them inside the call (profile fanout_start_deferred).
      if (FANOUT_DEFERRED) defer(() => startSlots(kind, forkId, runners, child, resolveAll, rejectAll))
      else startSlots(kind, forkId, runners, child, resolveAll, rejectAll)
    })
  }
  function startSlots(kind, forkId, runners, child, resolveAll, rejectAll) {
    const n = runners.length
    const results = []
    const failures = []
    let left = n
    let dropped = 0
    const finish = () => {
      join(forkId)
      for (let i = 0; i < n; i++) {
        if (failures[i] !== undefined) send({ t: 'log', message: kind + '[' + i + '] failed: ' + failures[i], child })
      }
      if (dropped > 0) send({ t: 'log', message: kind + '(): ' + dropped + ' of ' + n + ' slots dropped: the token budget is spent', child })
      // The results cross the boundary copy (measured 2.1.332, fanout-results-copied: a slot's object
      // is a copy, functions are dropped, a Date or Map becomes a plain object, an array over 4,096
      // inside a result rejects the whole call); values passed between pipeline stages are not copied.
      let out
      try { out = boundaryCopy(results, CHILD_DEPTH) } catch (e) { rejectAll(asHostError(e)); return }
      resolveAll(out)
    }
    for (let i = 0; i < n; i++) {
      put(results, i, undefined)
      const fail = (err) => {
        results[i] = null
        if (wsh(budgetErrors, err)) dropped++
        else failures[i] = slotText(err)
      }
      let p
      // A slot's failure only ever reaches the log as text, so a host error here leaks nothing.
      try { p = runSlot(forkId, i, runners[i]) } catch (err) { fail(err); if (--left === 0) finish(); continue }
      apply(promiseThen, PromiseCtor.resolve(p), [(v) => { results[i] = v; if (--left === 0) finish() },
        (err) => { fail(err); if (--left === 0) finish() }])
    }
  }
  function parallel(thunks) {
    let fns
    try { fns = fanoutArray('parallel', thunks, parallel) } catch (e) { return reject(asHostError(e)) }
    for (let i = 0; i < fns.length; i++) {
      if (typeof fns[i] !== 'function') {
        return reject(hostError('TypeError', 'parallel() expects an array of functions, not promises. Wrap each call: () => agent(...)', hereFrames(parallel)))
      }
    }
    const forkId = fork('parallel', fns.length)
    const runners = []
    for (let i = 0; i < fns.length; i++) { const fn = fns[i]; put(runners, i, () => fn()) }
    return settleSlots('parallel', forkId, runners)
  }
  function pipeline(items, ...stages) {
    let list
    try { list = fanoutArray('pipeline', items, pipeline) } catch (e) { return reject(asHostError(e)) }
    for (let s = 0; s < stages.length; s++) {
      if (typeof stages[s] !== 'function') {
        return reject(hostError('TypeError', 'pipeline() stages must be functions: pipeline(items, item => ..., result => ...)', hereFrames(pipeline)))
      }
    }
    // An item is awaited before the first stage (measured 2.1.332, pipeline-promise-items: a
    // promise or thenable item reaches stage 1 as its value, the third argument stays the item
    // itself; a rejected item fails its slot). Without stages the values are the awaited items;
    // the untouched slot chains still fork and join.
    const forkId = fork('pipeline', list.length)
    const runners = []
    for (let index = 0; index < list.length; index++) {
      const item = list[index]
      put(runners, index, async () => {
        let prev = await item
        for (let s = 0; s < stages.length; s++) {
          prev = await stages[s](prev, item, index)
          if (prev === null) return null
        }
        return prev
      })
    }
    return settleSlots('pipeline', forkId, runners)
  }

  // The injected globals (measured, realm-globals-shape): writable, enumerable, configurable data
  // properties; the functions are anonymous with length 0.
  // The injected functions are not constructors and have no prototype (measured 2.1.332,
  // realm-intrinsics-frozen: new parallel() is a TypeError), so each is wrapped in a method.
  const method = (f) => ({ m(...argv) { return apply(f, undefined, argv) } }).m
  const globals = {
    agent: method(agent), parallel: method(parallel), pipeline: method(pipeline), workflow: method(workflow),
    phase: method(phase), log: method(log),
    budget, console: makeConsole(CHILD && CHILD.name), setTimeout: method(setTimeout_), clearTimeout: method(clearTimeout_),
  }
  const gkeys = ObjectKeys(globals)
  for (let i = 0; i < gkeys.length; i++) {
    const v = globals[gkeys[i]]
    if (typeof v === 'function') {
      ObjectDefineProperty(v, 'name', { value: '', configurable: true })
      ObjectDefineProperty(v, 'length', { value: 0, configurable: true })
    }
    ObjectDefineProperty(G, gkeys[i], { value: v, writable: true, configurable: true, enumerable: true })
  }
  // The global object is no thenable and, in 2.1.332, its Error cannot be replaced: both are
  // read-only globals there (measured, realm-intrinsics-frozen; 2.1.209 has only the first).
  ObjectDefineProperty(G, 'then', { value: undefined, writable: false, enumerable: false, configurable: false })
  if (PROFILE !== 'claude-code/2.1.209') ObjectDefineProperty(G, 'Error', { writable: false, configurable: false })
  const setArgs = (v) => ObjectDefineProperty(G, 'args', { value: v, writable: true, configurable: true, enumerable: true })
  // this at the top level of a workflow is its global object (Claude Code 2.1.332, measured): the
  // body's function runs with the global object as this and returns the async arrow, which keeps it
  const start = (main) => apply(promiseThen, PromiseCtor.resolve(undefined), [() => apply(apply(main, G, []), undefined, [])])

  return {
    deliver(id, text) {
      const resolve = apply(mapGet, pending, [id])
      if (resolve !== undefined) {
        apply(mapDelete, pending, [id])
        if (text !== null) apply(mapSet, inbox, [id, text])
        resolve(undefined)
        return
      }
      // A workflow() call the host could not resolve (not found, refused, unreadable).
      const entry = apply(mapGet, childCalls, [id])
      if (entry === undefined) return
      apply(mapDelete, childCalls, [id])
      const r = JSONparse(text)
      const info = r.error !== null && typeof r.error === 'object' ? r.error : {}
      ws(refusals, info)
      entry.reject(info)
    },
    returned() { returned = true },
    // A job in this realm's queue that lets the host flush other realms inside this realm's flush
    // (so under its time limit); the promise it returns is the host's to recognise.
    queueDrain() { return apply(promiseThen, PromiseCtor.resolve(undefined), [() => { drain() }]) },
    // Claude Code 2.1.209 (measured): import() rejects with an Error reading exactly this.
    importError() { return new ErrorCtor('import() is not available in workflow scripts.') },
    setArgs(text) { setArgs(text === null ? undefined : JSONparse(text)) },
    // -- a child's call, seen from the parent realm --
    childArgs(id) {
      const entry = apply(mapGet, childCalls, [id])
      return entry === undefined ? null : { has: entry.has, args: entry.args }
    },
    childFailed(id, name, message, stack) {
      const entry = apply(mapGet, childCalls, [id])
      if (entry === undefined) return null
      apply(mapDelete, childCalls, [id])
      // profile claude-code/2.1.209 (measured): the message is the child's whole stack text
      const err = hostError('' + name, CHILD_MESSAGE_IS_STACK && stack !== undefined ? '' + stack : '' + message)
      if (stack !== undefined) err.stack = '' + stack
      entry.reject(err)
      return err
    },
    childDone(id, value) {
      const entry = apply(mapGet, childCalls, [id])
      if (entry === undefined) return
      apply(mapDelete, childCalls, [id])
      entry.resolve(value)
    },
    // -- this realm as a child --
    // The child's args, copied from its parent's values; false when the copy failed (the child then
    // failed, and its parent heard so).
    adoptArgs(has, value) {
      let args
      try { args = has ? boundaryCopy(value, CHILD_DEPTH) : undefined } catch (e) {
        const w = wrapThrown(asHostError(e))
        end(false, undefined, w.name, w.message, w.stack)
        return false
      }
      setArgs(args)
      return true
    },
    runChild(main) {
      apply(promiseThen, start(main), [
        (v) => {
          let copy
          try { copy = boundaryCopy(v, CHILD_DEPTH) } catch (e) { const w = wrapThrown(e); end(false, undefined, w.name, w.message, w.stack); return }
          end(true, copy)
        },
        (e) => { const w = wrapThrown(e); end(false, undefined, w.name, w.message, w.stack, e) },
      ])
    },
    // -- this realm as the top-level workflow --
    runMain(main) {
      apply(promiseThen, start(main), [
        (v) => {
          returned = true
          let text
          try { text = finalJson(v) } catch (e) { const w = wrapThrown(e); end(false, undefined, w.name, w.message, w.stack, e); return }
          end(true, text)
        },
        (e) => { returned = true; const w = wrapThrown(e); end(false, undefined, w.name, w.message, w.stack, e) },
      ])
    },
  }
})`

// ---------------------------------------------------------------------------------------------
// Host side of the worker.
// A workflow body is compiled with vm.compileFunction, which parses it as the body of one strict
// function: no text in the body can close that function early and run code outside it (string
// concatenation into a `(async () => {…})` wrapper could be escaped, e.g. by text tree-sitter reads as
// a regular expression and V8 as a division). Inside it an async arrow carries top-level await; the
// function is called with the realm's global object as `this` and returns the arrow, which the prelude
// then calls, so top-level `this` is the global object, as in Claude Code 2.1.332, and no frame of
// workflow.js is the wrapper's own call. A run's body starts on line 2 of workflow.js (BODY_HEAD is line 1): stack
// positions count as Claude counts them (the host sends the body as Claude runs it, see
// realm/_body.py, with where it starts in the file); a syntax check counts in the file (lineOffset -1).
const BODY_HEAD = "'use strict'; return (async () => {\n"
const BODY_TAIL = '\n})'
const FILENAME = 'workflow.js'

// Dynamic import() (profile claude-code/2.1.209 launches files that use it; 2.1.332 refuses them at
// load, but a static scan can be fooled) rejects with an Error made *inside* the realm. Without
// this callback Node rejects with an error from the worker's own realm, whose constructor chain
// reaches the worker's Function and `process`. Node honours the callback only when the worker runs
// with --experimental-vm-modules (worker.py passes it); the rejection settles on a later host turn,
// so the realm's microtasks are flushed once more then and the deadlock check waits for it.
let importsInFlight = 0
const importRealm = new WeakMap() // compiled script -> the realm it runs in
function refuseImport(specifier, referrer) {
  importsInFlight++
  const realm = importRealm.get(referrer) || main
  setImmediate(() => { importsInFlight--; if (!finished) guarded(() => realm) })
  throw realm.api.importError()
}

function compile(body, context, lineOffset) {
  return vm.compileFunction(BODY_HEAD + body + BODY_TAIL, [], {
    filename: FILENAME, lineOffset, parsingContext: context, importModuleDynamically: refuseImport,
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

let main = null            // the top-level workflow's realm
const children = []        // every child realm of the run (each ends before the run does)
let syncTimeoutMs = 30000
let profileName = ''
let cacheKeyOptions = []
let realmConfig = null
let spent = 0              // the run's spending, kept here for every realm (budget.spent())
let outstanding = 0        // requests, timers and child starts that will settle something later
let workflowCalls = 0      // workflow() calls the host has not answered yet
let heldDone = null        // the final message, held while workflow() calls still resolve
let gseq = 0
const routes = new Map()   // id the host sees -> { realm, id, kind, cell }
let hostRequests = 0       // workflow() and forwarded agent() calls the host has not answered yet
const errWhere = new WeakMap() // a child's wrapped error -> where it was thrown in the child's file
const flushScript = new vm.Script('undefined', { filename: 'workflow-mcp:flush' })
const promisePrototype = new vm.Script('Promise.prototype', { filename: 'workflow-mcp:realm' })
let finished = false

// Each realm has its own microtask queue (microtaskMode 'afterEvaluate'), and a job runs in the
// queue of its handler's realm. Which queues can hold work after host-side code ran: the top-level
// realm's (every child's end resolves a promise there) and those of the realms that code touched (an
// answer, a timer, a child's start). A running child's objects reach no other realm, so nothing else
// queues work for it; an ended child's can (its result is the parent's now), so a promise of an
// ended child's realm that is made, settled or run marks that realm (promise hooks, installed with
// the first child: a run without nested workflows pays nothing). Before a deadlock is declared every
// child realm is flushed once more (a thenable of an ended child, say, queues work no hook sees).
//
// A flush with a time limit costs a watchdog (about 0.1 ms), so there is one per flush: the other
// realms' queues are run from a job in the top-level realm's queue (onDrain), inside its flush and
// under its limit; the job queues itself again while the realms it runs keep doing work, and a new
// round starts only if work ran after its last turn.
let activity = 0
let hooked = false
const protoRealm = new WeakMap()   // a child realm's Promise.prototype -> that realm
const ownPromises = new WeakSet()  // the drain jobs' promises: their work is not the workflow's
let quiet = false
let marked = []                    // ended child realms a hook saw promise work in
let drainTargets = []
let drainEnd = -1                  // activity when the last drain job ended
function hook() {
  if (hooked) return
  hooked = true
  const seen = (promise) => {
    if (quiet || ownPromises.has(promise)) return
    activity++
    const r = protoRealm.get(Object.getPrototypeOf(promise))
    if (r !== undefined && r.ended && !r.marked) { r.marked = true; marked.push(r) }
  }
  v8.promiseHooks.onInit(seen)
  v8.promiseHooks.onBefore(seen)
  v8.promiseHooks.onSettled(seen)
}
function timeoutError() {
  const err = new Error('Script execution timed out.')
  err.code = 'ERR_SCRIPT_EXECUTION_TIMEOUT'
  return err
}
function armDrain() {
  quiet = true
  try { ownPromises.add(main.api.queueDrain()) } finally { quiet = false }
}
function onDrain() {
  const before = activity
  const realms = []
  for (const t of drainTargets.concat(marked)) if (t && t !== main && !realms.includes(t)) realms.push(t)
  for (const r of marked) r.marked = false
  marked = []
  for (const r of realms) flushScript.runInContext(r.ctx) // under the enclosing flush's limit
  if (activity !== before || marked.length > 0) armDrain()
  drainEnd = activity
}
function flushAll(targets, everyRealm) {
  if (!hooked) { flushScript.runInContext(main.ctx, { timeout: syncTimeoutMs }); return false }
  const deadline = Date.now() + syncTimeoutMs
  const start = activity
  drainTargets = everyRealm ? targets.concat(children) : targets
  for (;;) {
    const left = deadline - Date.now()
    if (left <= 0) throw timeoutError()
    armDrain()
    flushScript.runInContext(main.ctx, { timeout: left })
    if (activity === drainEnd && marked.length === 0) return activity !== start
  }
}

function fail(name, message) {
  if (finished) return
  finished = true
  out({ t: 'done', ok: false, error: { name, message } })
  setImmediate(exitSoon)
}

// Runs host-side work that may call into realms (fn returns the realms it touched), then the
// microtasks it queued.
function guarded(fn) {
  runGuarded(fn)
  if (rp !== null) rpPump()
}
function runGuarded(fn) {
  try {
    const touched = fn()
    const targets = Array.isArray(touched) ? touched : [touched]
    flushAll(targets, false)
    if (heldDone !== null && workflowCalls === 0) release()
    const stuck = () => !finished && heldDone === null && outstanding === 0 && importsInFlight === 0
    if (stuck() && flushAll(targets, true) && heldDone !== null && workflowCalls === 0) release()
    if (stuck()) {
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

// A realm: its own context, globals and microtask queue. `where` maps the positions V8 reports
// (line 2 is the body's first line) back to the file: { path, line, column } of that first line.
function makeRealm(child, where) {
  const ctx = newContext()
  const realm = { ctx, api: null, child, where, timers: new Map(), pending: 0, ended: false, marked: false, parent: null, parentId: 0 }
  const cfg = Object.assign({}, realmConfig, {
    childName: child ? child.name : null, childPhase: child ? child.phase : null,
    returned: main !== null && main.returned === true,
  })
  realm.api = preludeScript.runInContext(ctx)(
    (text) => onPost(realm, text), onFork, onRunSlot, onJoin, () => spent,
    child ? (ok, value, name, message, stack) => onChildEnd(realm, ok, value, name, message, stack)
      : (ok, value, name, message, stack, thrown) => onMainEnd(ok, value, name, message, stack, thrown),
    onDrain, captureStack, cfg)
  if (child) {
    children.push(realm)
    protoRealm.set(promisePrototype.runInContext(ctx), realm)
  }
  return realm
}
let preludeScript = null

// The stack at a call from a realm, as text (`fn` and the frames above it left out): captured here,
// in the worker's own context, whose Error.stackTraceLimit may change; the realm's is frozen.
function captureStack(fn, limit) {
  const o = {}
  const saved = Error.stackTraceLimit
  Error.stackTraceLimit = limit
  try {
    if (typeof fn === 'function') Error.captureStackTrace(o, fn)
    else Error.captureStackTrace(o)
  } finally {
    Error.stackTraceLimit = saved
  }
  return typeof o.stack === 'string' ? o.stack : ''
}

function settle(realm, n) {
  outstanding -= n
  realm.pending -= n
}

// Where a stack names the workflow's file: the first frame in workflow.js, as a file position.
function locate(realm, stack) {
  if (typeof stack !== 'string') return null
  const lines = stack.split('\n')
  for (let i = 1; i < lines.length; i++) {
    const m = /workflow\.js:(\d+):(\d+)/.exec(lines[i])
    if (!m || !lines[i].startsWith('    at ')) continue
    const L = Number(m[1]), C = Number(m[2])
    const w = realm.where
    const line = L <= 2 ? w.line : w.line + L - 2
    const column = L <= 2 ? w.column + C - 1 : C
    return { path: w.path, line, column, reported: FILENAME + ':' + L + ':' + C }
  }
  return null
}

function onMainEnd(ok, value, name, message, stack, thrown) {
  main.returned = true
  main.ended = true
  for (const r of children) if (!r.ended) r.api.returned()
  let msg
  if (ok) {
    msg = { t: 'done', ok: true, value: wellFormed(value) } // JSON text: out() cannot see its escapes
  } else {
    let where = thrown !== null && typeof thrown === 'object' ? errWhere.get(thrown) : undefined
    if (where === undefined) where = locate(main, stack)
    const error = { name, message: clip(message, ERROR_TEXT.max, ERROR_TEXT.keep), stack: stack.length > 8000 ? stack.slice(-8000) : stack }
    if (where) error.location = where
    msg = { t: 'done', ok: false, error }
  }
  if (workflowCalls > 0) {
    // Calls the workflow left pending are never dispatched; the children it started still start
    // (their synchronous part runs and logs, measured realm-unawaited-child-workflow), then it ends.
    heldDone = msg
    out({ t: 'returned' })
    return
  }
  heldDone = msg
}
function release() {
  const msg = heldDone
  heldDone = null
  if (finished) return
  finished = true
  if (logSent.dropped > 0) { out({ t: 'dropped', lines: logSent.dropped }); logSent.dropped = 0 }
  out(msg)
  setImmediate(exitSoon)
}

function onChildEnd(realm, ok, value, name, message, stack) {
  realm.ended = true
  const parent = realm.parent
  if (!finished) out({ t: 'child', name: realm.child.name, ok, message: ok ? undefined : clip(stack, ERROR_TEXT.max, ERROR_TEXT.keep) })
  if (ok) { parent.api.childDone(realm.parentId, value); return }
  const err = parent.api.childFailed(realm.parentId, name, message, stack)
  const where = locate(realm, stack)
  if (err !== null && where) errWhere.set(err, where)
}

function onPost(realm, text) {
  const msg = JSON.parse(text)
  if (msg.t === 'log') {
    msg.message = clip(msg.message, logLine.max, logLine.keep)
    // The run's log limits hold here too, so a flood of log() never piles up in this process: lines
    // past the limit (after one more, which makes the host say so) are only counted, and the count
    // crosses once, before the final value.
    if (logSent.lines > logLimit.lines || logSent.chars > logLimit.chars) { logSent.dropped++; return }
    logSent.lines++
    logSent.chars += typeof msg.message === 'string' ? msg.message.length : 0
  } else if (msg.t === 'call') {
    const route = { realm, id: msg.id, kind: msg.fn, cell: cell() }
    if (msg.fn === 'agent') {
      let bare = true
      for (const k in msg.opts) { bare = false; break } // most calls pass no options
      if (!bare && depthOf(msg.opts, 0) > MAX_DEPTH) {
        throw new RangeError('agent() options are nested deeper than ' + MAX_DEPTH + ' levels')
      }
      const c = route.cell
      const picked = {}
      let keyable = true
      if (!bare) for (const k of cacheKeyOptions) {
        if (!msg.opts || !Object.prototype.hasOwnProperty.call(msg.opts, k) || msg.opts[k] === undefined) continue
        if (Object.prototype.hasOwnProperty.call(TOOL_LISTS, k)) {
          const list = toolList(k, msg.opts[k])
          if (list === null) keyable = false
          else if (list.length > 0) picked[k] = list
        } else picked[k] = msg.opts[k]
      }
      const canon = bare ? '{}' : JSON.stringify(sortKeys(picked))
      const key = keyable ? 'v2:' + H(c.chain, msg.prompt, canon) : ''
      if (keyable) c.chain = key
      msg.key = key
      msg.canon = canon
      delete msg.local
      if (rp !== null) {
        const taken = rpDecide(realm, msg, key, canon)
        if (taken !== null) {
          msg.id = ++gseq
          // Announced in call order, many to a message: [id, record, label, phase, prompt, key,
          // content key (null: the record's)].
          // The host needs only the start of the prompt its preview is made from.
          const start = msg.prompt.length > rp.previewChars ? msg.prompt.slice(0, rp.previewChars) : msg.prompt
          tookBuf.push([msg.id, taken.index, msg.label, msg.phase, start, key, rpCallCkey])
          tookChars += start.length + msg.label.length + (msg.phase === null ? 0 : msg.phase.length) + 200
          if (tookBuf.length >= OUT_CHUNK || tookChars >= TOOK_CHARS) flushOut()
          rpCount++
          outstanding++
          realm.pending++
          rpHold({ gid: msg.id, id: route.id, realm, rec: taken })
          return
        }
      }
    }
    msg.id = ++gseq
    try { out(msg) } catch (e) { if (rp !== null && !rp.sealed) rpHandBack(); throw e } // throws (nothing recorded) when the message is too large
    routes.set(msg.id, route)
    outstanding++
    realm.pending++
    if (route.kind === 'workflow') workflowCalls++
    else { hostRequests++; if (rp !== null) rpCount++ }
    return
  } else if (msg.t === 'timer') {
    const entry = addTimer(realm, msg.id, msg.ms)
    realm.timers.set(msg.id, entry)
    outstanding++
    realm.pending++
    return
  } else if (msg.t === 'clear') {
    const entry = realm.timers.get(msg.id)
    if (entry !== undefined) { entry.cleared = true; realm.timers.delete(msg.id); settle(realm, 1) }
    return
  }
  // Only a log line or a phase goes on as the realm wrote it: nothing a realm posts can pass for one of
  // this worker's own messages (a replay announcement, a delivery, the end of the run).
  if (msg.t !== 'log' && msg.t !== 'phase') return
  out(msg)
}

// Timers of every realm, in one queue ordered by due time, then by creation. Due times count from
// the start of the host turn that made them, so timers made together fire in the order of their
// delays however long the turn took (one Node timer per delay would count each from the moment it
// was made, and under load a 2 ms timer made first could fire before a 1 ms one made after it). A
// delay is at least 1 ms, as Node's setTimeout has it, and is never wrapped: Node's setTimeout turns a
// delay past 2^31 - 1 ms into 1 ms, while in Claude Code 2^31 ms, 2^32 + 5 ms, 1e10 ms and Infinity
// do not fire (measured 2.1.332, realm-settimeout-large-delays), so the one Node timer that waits for
// the earliest entry is armed for at most 2^31 - 1 ms and re-armed until the entry is due.
const MAX_NODE_DELAY = 2147483647
const timerQueue = []
let timerSeq = 0
let timerTurn = null       // performance.now() at the start of this host turn, once a timer asks
let timerHandle = null
let timerAt = Infinity
function addTimer(realm, id, ms) {
  if (timerTurn === null) {
    timerTurn = performance.now()
    process.nextTick(() => { timerTurn = null })
  }
  // The realm sends Number(ms) with NaN and negatives as 0, so a null (JSON's Infinity) is Infinity.
  const delay = ms === null ? Infinity : ms >= 1 ? ms : 1
  const entry = { realm, id, due: timerTurn + delay, seq: ++timerSeq, cleared: false }
  let i = timerQueue.length
  while (i > 0 && timerQueue[i - 1].due > entry.due) i--
  timerQueue.splice(i, 0, entry)
  armTimer()
  return entry
}
function armTimer() {
  while (timerQueue.length > 0 && timerQueue[0].cleared) timerQueue.shift()
  if (timerQueue.length === 0 || timerQueue[0].due >= timerAt) return
  if (timerHandle !== null) clearTimeout(timerHandle)
  timerAt = timerQueue[0].due
  timerHandle = setTimeout(fireTimers, Math.min(MAX_NODE_DELAY, Math.max(1, Math.ceil(timerAt - performance.now()))))
}
function fireTimers() {
  timerHandle = null
  timerAt = Infinity
  // Only the entries due now and made before this round: a timer a callback makes waits its turn.
  const now = performance.now(), last = timerSeq
  const due = []
  while (timerQueue.length > 0 && timerQueue[0].due <= now && timerQueue[0].seq <= last) due.push(timerQueue.shift())
  for (const entry of due) {
    const realm = entry.realm
    if (entry.cleared || !realm.timers.delete(entry.id)) continue
    settle(realm, 1)
    guarded(() => { realm.api.deliver(entry.id, null); return realm })
  }
  armTimer()
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


// -------------------------------------------------------------------------------------------
// Replay in the realm. A resumed run's host sends, before `start`, the records its replay may reuse
// (`replay` messages: the policy, the run's call cap and every reachable record with its completion
// rank, original delivery, output tokens and result as JSON text). An agent() call of the top-level
// workflow whose options cannot change the host's decision (none but label and phase) and whose record
// the host would take is answered here, with no round trip: the call is announced to the host
// (`local`: the record's index) so it records it in call order, and each delivery of recorded results
// is announced (`released`) before the workflow sees it, so the host records the outcome (the event
// log and journal read as a host-side replay's). This mirrors the host's rules exactly — the take of
// engine/journal.py (`content`: the n-th occurrence of a content key takes its n-th record; `prefix`:
// the longest unchanged prefix), the release order of engine/release.py (a result of rank r waits for
// every lower rank; results of one original delivery go out together; when nothing but held results
// is left, the lowest held one is released) and the admission of engine/scheduler.py (the call cap,
// the token budget). Whenever this realm cannot be sure what the host would decide (a call with other
// options, a child workflow's call, the cap near, a budget while host calls are in flight), it hands
// every held call and everything after to the host (`handback`) and the host's own replay goes on
// from the same state. A call the host would not replay (a miss, a record it refuses) goes to the host
// as usual and replay here goes on.
let rp = null        // the replay table, while this realm replays by itself
let rpCount = 0      // agent() calls admitted so far (at least the host's count)
let rpPumping = false
const RP_TEXT_MAX = 16384
function rpAdd(msg) {
  if (rp === null) {
    const ranks = []
    rp = {
      policy: msg.policy === 'prefix' ? 'prefix' : 'content', cap: msg.cap, recs: [],
      byContent: new Map(), byKeyOnly: new Map(), byKey: new Map(), missed: false,
      neutral: new Set(msg.neutral || []), options: new Set(msg.options || []), known: new Set(), ranks, settled: new Set(), granted: new Set(),
      next: 0, waiting: new Map(), ready: [], forced: [], sealed: false, previewChars: msg.previewChars || 557,
    }
  }
  for (const r of msg.records) {
    // [index, key, contentKey, rank, turn, outputTokens, usable, resultText | null]
    const rec = { index: r[0], key: r[1], ckey: r[2], rank: r[3], turn: r[4], tokens: r[5], usable: r[6], text: r[7] }
    rp.recs[rec.index] = rec
    if (rec.key && !rp.byKey.has(rec.key)) rp.byKey.set(rec.key, rec)
    if (rp.policy !== 'prefix') {
      const [map, k] = rec.ckey ? [rp.byContent, rec.ckey] : [rp.byKeyOnly, rec.key]
      let q = map.get(k)
      if (q === undefined) { q = { items: [], head: 0 }; map.set(k, q) }
      q.items.push(rec)
    }
    if (rec.rank >= 0 && !rp.known.has(rec.rank)) { rp.known.add(rec.rank); rp.ranks.push(rec.rank) }
  }
  if (msg.last === true) rp.ranks.sort((a, b) => a - b)
}
const rpQueue = (map, k) => { const q = map.get(k); return q !== undefined && q.head < q.items.length ? q : null }
// The record the host's take would return for (key, contentKey), and the queue it comes from.
function rpPeek(key, ckey) {
  if (rp.policy === 'prefix') return !key || rp.missed ? null : (rp.byKey.get(key) || null)
  const q = rpQueue(rp.byContent, ckey) || (key ? rpQueue(rp.byKeyOnly, key) : null)
  return q === null ? null : q.items[q.head]
}
function rpTake(key, ckey) {
  if (rp.policy === 'prefix') {
    if (!key) return null
    const hit = rp.missed ? null : (rp.byKey.get(key) || null)
    if (hit === null) rp.missed = true
    return hit
  }
  const q = rpQueue(rp.byContent, ckey) || (key ? rpQueue(rp.byKeyOnly, key) : null)
  if (q === null) { rp.missed = true; return null }
  return q.items[q.head++]
}
// Whether the host admits the next call: 'yes', 'no' (it refuses without taking a record) or
// 'unsure' (this realm cannot know: the cap is near, or host calls in flight may have spent budget).
function rpAdmission() {
  if (rpCount >= rp.cap) return 'unsure'
  const total = realmConfig.budgetTotal
  if (total !== null && total > 0) {
    if (hostRequests > 0) return 'unsure'
    if (spent >= total) return 'no'
  }
  return 'yes'
}
function rpPlain(realm, msg) {
  if (realm !== main || msg.agentType !== undefined) return false
  // A label or phase too long to announce in a batch goes to the host, which sizes each message.
  if (msg.label.length > RP_TEXT_MAX || (msg.phase !== null && msg.phase.length > RP_TEXT_MAX)) return false
  for (const k of Object.keys(msg.opts)) if (rp.options.has(k) && !rp.neutral.has(k)) return false
  return true
}
// The record this realm answers the call with, or null: the call goes to the host (after every held
// call, when this realm stops replaying by itself).
let rpCallCkey = null // the content key rpDecide computed for its record (null: the record's own)
function rpDecide(realm, msg, key, canon) {
  if (rp.sealed) return null
  const admission = rpAdmission()
  if (admission === 'no') return null
  if (admission === 'unsure') { rpHandBack(); return null }
  // The same v2 key means the same prompt and options, so the same content key: a record found by
  // its v2 key that heads its content key's queue is what the host takes, with no hash to compute.
  let ckey = null
  let rec = null
  const byKey = key ? rp.byKey.get(key) : undefined
  if (byKey !== undefined && byKey.ckey && (rp.policy === 'prefix' ? !rp.missed : rpPeek(key, byKey.ckey) === byKey)) {
    rec = byKey
    ckey = byKey.ckey
    rpCallCkey = null
  } else {
    ckey = 'c1:' + H(msg.prompt, canon)
    rec = rpPeek(key, ckey)
    rpCallCkey = ckey
  }
  if (rec === null) { rpTake(key, ckey); return null } // a miss: the host misses too, the call runs live
  const plain = rpPlain(realm, msg)
  if (plain && !rec.usable) {
    // The host takes it, finds it unusable and runs the call live: the record is settled and, under
    // `prefix`, every later call runs live too.
    rpTake(key, ckey)
    rp.missed = true
    rpSettle(rec.rank)
    return null
  }
  if (!plain || rec.text === null) { rpHandBack(); return null }
  rpTake(key, ckey)
  return rec
}
function rpLowest() {
  const ranks = rp.ranks
  while (rp.next < ranks.length && (rp.settled.has(ranks[rp.next]) || rp.granted.has(ranks[rp.next]))) rp.next++
  return rp.next < ranks.length ? ranks[rp.next] : null
}
function rpHold(entry) {
  const r = entry.rec.rank
  if (r < 0 || !rp.known.has(r)) { rp.ready.push(entry); return }
  const lowest = rpLowest()
  if (lowest === null || lowest >= r) { rp.granted.add(r); rp.ready.push(entry); return }
  rp.waiting.set(r, entry)
}
function rpSettle(r) {
  if (r < 0) return
  rp.granted.delete(r)
  rp.settled.add(r)
  rpWake()
}
function rpWake() {
  while (rp.waiting.size > 0) {
    const first = rpLowest()
    if (first === null || !rp.waiting.has(first)) return
    const entry = rp.waiting.get(first)
    rp.waiting.delete(first)
    rp.granted.add(first)
    rp.ready.push(entry)
  }
}
function rpForce() {
  if (rp.granted.size > 0 || rp.waiting.size === 0) return false
  let first = Infinity
  for (const r of rp.waiting.keys()) if (r < first) first = r
  for (let i = rp.next; i < rp.ranks.length && rp.ranks[i] < first; i++) {
    const r = rp.ranks[i]
    if (!rp.settled.has(r)) { rp.settled.add(r); rp.forced.push(r) }
  }
  rpWake()
  return true
}
// Hand every held call to the host, in call order; this realm replays nothing by itself any more.
function rpHandBack() {
  const held = rp.ready.concat(Array.from(rp.waiting.values())).sort((a, b) => a.gid - b.gid)
  out({ t: 'handback', ids: held.map((e) => e.gid), settled: rp.forced })
  for (const e of held) {
    routes.set(e.gid, { realm: e.realm, id: e.id, kind: 'agent', cell: null })
    hostRequests++
  }
  rp.sealed = true
  rp.ready = []
  rp.waiting.clear()
  if (!rpPumping) rp = null
}
// Deliver what may go: each original delivery's results together, one realm turn each; when nothing
// may go and nothing but held results is left (no host call in flight), release the lowest held one.
function rpPump() {
  rpPumping = true
  try {
    while (rp !== null && !rp.sealed && !finished) {
      if (main === null || main.returned) { rp.ready = []; rp.waiting.clear(); break } // never answered, as on the host
      if (rp.ready.length === 0) {
        if (rp.waiting.size === 0 || hostRequests > 0 || workflowCalls > 0 || importsInFlight > 0 || !rpForce()) break
        continue
      }
      // What is ready now goes out in its original deliveries; what their continuations make ready
      // goes out after (the host sends the answers of one turn together, the next turn's later).
      let left = rp.ready.length
      while (left > 0 && rp !== null && !rp.sealed && !finished) {
        const first = rp.ready[0]
        let n = 1
        while (n < left && first.rec.turn >= 0 && rp.ready[n].rec.turn === first.rec.turn) n++
        const items = rp.ready.splice(0, n)
        left -= n
        out({ t: 'released', ids: items.map((e) => e.gid) })
        runGuarded(() => {
          for (const e of items) {
            settle(e.realm, 1)
            spent += e.rec.tokens
            e.realm.api.deliver(e.id, '{"ok":true,"value":' + e.rec.text + ',"spent":' + spent + '}')
          }
          return main
        })
        if (rp !== null && !rp.sealed) for (const e of items) rpSettle(e.rec.rank)
      }
    }
  } finally {
    rpPumping = false
    if (rp !== null && rp.sealed) rp = null
  }
}

function start(msg) {
  syncTimeoutMs = msg.syncTimeoutMs || 30000
  profileName = msg.profile || ''
  cacheKeyOptions = msg.cacheKeyOptions || []
  flatChain = msg.flatCacheChain === true
  spent = msg.spent || 0
  if (msg.logLine) logLine = { max: msg.logLine.max, keep: msg.logLine.keep }
  if (msg.logLimit) logLimit = { lines: msg.logLimit.lines, chars: msg.logLimit.chars }
  MAX_DEPTH = msg.maxValueDepth || 256
  const b = msg.boundary || {}
  realmConfig = {
    profile: profileName, maxArray: msg.maxFanoutItems || 4096, childDepth: b.childDepth || 100000,
    finalDepth: b.finalDepth || 28000, hostDepth: MAX_DEPTH, childErrorMessageIsStack: b.childErrorMessageIsStack === true,
    budgetTotal: msg.budgetTotal === undefined ? null : msg.budgetTotal,
    fanoutStartDeferred: msg.fanoutStartDeferred !== false,
  }
  const where = { path: msg.filename || null, line: msg.bodyLine || 2, column: msg.bodyColumn || 1 }
  try {
    compile(msg.body, scratchContext(), 0) // its errors are read where no workflow code runs
  } catch (err) {
    const p = syntaxProblem(err)
    const line = p.line === null ? null : (p.line <= 2 ? where.line : where.line + p.line - 2)
    const column = p.column === null || p.line === null ? p.column : (p.line <= 2 ? where.column + p.column - 1 : p.column)
    fail('SyntaxError', p.message + (line ? ' (line ' + line + (column ? ', column ' + column : '') + ')' : ''))
    return
  }
  preludeScript = new vm.Script(PRELUDE, { filename: 'workflow-mcp:prelude' })
  main = makeRealm(null, where)
  const fn = compile(msg.body, main.ctx, 0)
  importRealm.set(fn, main)
  main.api.setArgs(msg.args === undefined ? null : msg.args)
  guarded(() => { main.api.runMain(fn); return main })
}

// A resolved nested workflow: its own realm, its args copied in from the parent's copy, its agent
// calls on the cache-key chain the workflow() call was made on.
function startChild(route, msg) {
  const parent = route.realm
  try {
    compile(msg.body, scratchContext(), 0) // its errors are read where no workflow code runs
  } catch (err) {
    parent.api.childFailed(route.id, 'SyntaxError', 'workflow ' + JSON.stringify(msg.name) + ': ' + syntaxProblem(err).message)
    return null
  }
  const info = parent.api.childArgs(route.id)
  if (info === null) return null
  hook()
  const realm = makeRealm({ name: msg.name, phase: msg.phase },
    { path: msg.filename || null, line: msg.bodyLine || 2, column: msg.bodyColumn || 1 })
  realm.parent = parent
  realm.parentId = route.id
  const fn = compile(msg.body, realm.ctx, 0)
  importRealm.set(fn, realm)
  if (realm.api.adoptArgs(info.has === true, info.args)) {
    // The body runs in the flush that follows, on the chain the workflow() call was made on.
    chainStore.run(route.cell, () => realm.api.runChild(fn))
  }
  return realm
}

// Answers to realm requests; workflow code runs only in the flush that follows (and a child's
// synchronous start).
function answer(msg) {
  if (msg.t !== 'result' && msg.t !== 'child') { fail('ProtocolError', 'unknown answer ' + JSON.stringify(msg.t)); return null }
  const route = routes.get(msg.id)
  if (route === undefined) return null
  routes.delete(msg.id)
  settle(route.realm, 1)
  if (route.kind === 'workflow') workflowCalls--
  else hostRequests--
  if (msg.t === 'result') {
    if (msg.r && typeof msg.r.spent === 'number') spent = msg.r.spent
    route.realm.api.deliver(route.id, JSON.stringify(msg.r))
    return route.realm
  }
  if (typeof msg.spent === 'number') spent = msg.spent
  return [route.realm, startChild(route, msg)]
}

function onHost(msg) {
  switch (msg.t) {
    case 'start': return start(msg)
    case 'replay': return rpAdd(msg)
    case 'result':
    case 'child':
      return guarded(() => answer(msg))
    case 'batch':
      return guarded(() => msg.items.map(answer).flat())
    case 'check': {
      const results = msg.sources.map((src) => {
        try { compile(src, scratchContext(), -1) } catch (err) { return syntaxProblem(err) }
        return escapeProblem(src)
      })
      return out({ t: 'checked', id: msg.id, results })
    }
    case 'collate':
      return out({ t: 'collated', id: msg.id, names: msg.names.slice().sort((a, b) => a.localeCompare(b)) })
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
