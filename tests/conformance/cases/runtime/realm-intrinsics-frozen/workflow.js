export const meta = { name: 'realm-intrinsics-frozen', description: 'which intrinsics are frozen, and what a workflow may still change' }
const standard = ['AggregateError', 'Array', 'ArrayBuffer', 'BigInt', 'BigInt64Array', 'BigUint64Array', 'Boolean', 'DataView', 'Date', 'Error', 'EvalError', 'Float32Array', 'Float64Array', 'Function', 'Int16Array', 'Int32Array', 'Int8Array', 'Intl', 'Iterator', 'JSON', 'Map', 'Math', 'Number', 'Object', 'Promise', 'Proxy', 'RangeError', 'ReferenceError', 'Reflect', 'RegExp', 'Set', 'String', 'Symbol', 'SyntaxError', 'TypeError', 'URIError', 'Uint16Array', 'Uint32Array', 'Uint8Array', 'Uint8ClampedArray', 'WeakMap', 'WeakSet', 'budget', 'console',
  'agent', 'parallel', 'pipeline', 'workflow', 'phase', 'log', 'setTimeout', 'clearTimeout', 'decodeURI', 'decodeURIComponent', 'encodeURI', 'encodeURIComponent', 'escape', 'unescape', 'eval', 'isFinite', 'isNaN', 'parseFloat', 'parseInt', 'globalThis']
const frozen = standard.filter((n) => Object.isFrozen(globalThis[n])).sort()
const protoNotFrozen = standard.filter((n) => { const v = globalThis[n]; return typeof v === 'function' && v.prototype && !Object.isFrozen(v.prototype) }).sort()
const P = Object.getPrototypeOf
const hidden = {
  FunctionProto: Object.isFrozen(Function.prototype), AsyncFunction: Object.isFrozen(P(async function () {}).constructor),
  AsyncFunctionProto: Object.isFrozen(P(async function () {})), GeneratorFunction: Object.isFrozen(P(function* () {}).constructor),
  GeneratorProto: Object.isFrozen(P(function* () {}).prototype), ArrayIteratorProto: Object.isFrozen(P([][Symbol.iterator]())),
  MapIteratorProto: Object.isFrozen(P(new Map().entries())), TypedArray: Object.isFrozen(P(Uint8Array)), TypedArrayProto: Object.isFrozen(P(Uint8Array.prototype)),
  IteratorProto: Object.isFrozen(P(P([][Symbol.iterator]()))), RegExpStringIter: Object.isFrozen(P(/a/[Symbol.matchAll]('a'))),
  IntlDateTimeFormat: Object.isFrozen(Intl.DateTimeFormat), IntlDateTimeFormatProto: Object.isFrozen(Intl.DateTimeFormat.prototype),
  methodsNotFrozen: [Math.max, Array.prototype.map, JSON.stringify, Promise.prototype.then, Object.keys].every((f) => !Object.isFrozen(f)),
  unscopablesNotFrozen: !Object.isFrozen(Array.prototype[Symbol.unscopables]),
  stackTraceLimit: Error.stackTraceLimit,
}
function t(f) { try { const r = f(); return r === undefined ? 'ok' : r } catch (e) { return 'threw ' + e.name } }
const attempts = {
  arrayProtoMethod: t(() => { Array.prototype.map = () => 1 }),
  arrayProtoNew: t(() => { Array.prototype.myHelper = () => 1 }),
  objectProtoNew: t(() => { Object.prototype.extra = 1 }),
  defineOnObjectProto: t(() => { Object.defineProperty(Object.prototype, 'x', { value: 1 }) }),
  stringProto: t(() => { String.prototype.shout = function () { return this.toUpperCase() } }),
  promiseThen: t(() => { Promise.prototype.then = () => 1 }),
  promiseAll: t(() => { Promise.all = () => 1 }),
  jsonStringify: t(() => { JSON.stringify = () => 'x' }),
  mathRandomAgain: t(() => { Math.random = () => 4 }),
  errorStackTraceLimit: t(() => { Error.stackTraceLimit = 50 }),
  symbolIterator: t(() => { Array.prototype[Symbol.iterator] = function* () {} }),
  methodProperty: t(() => { Math.max.extra = 1; return Math.max.extra }),
  globalFunctionProperty: t(() => { parseInt.extra = 2; return parseInt.extra }),
  replaceJSONGlobal: t(() => { const saved = JSON; globalThis.JSON = { patched: true }; const r = JSON.patched; globalThis.JSON = saved; return r }),
  replaceErrorGlobal: t(() => { Error = function () {} }),
  deleteObjectProtoMethod: t(() => delete Object.prototype.hasOwnProperty),
  ownArrayProperty: t(() => { const a = [1]; a.x = 2; a.push(3); return [a.length, a.x] }),
  classExtendsError: t(() => { class E2 extends Error { constructor() { super('m'); this.name = 'E2' } }; return String(new E2()) }),
}
const fnShape = {}
for (const n of ['parallel', 'pipeline', 'phase', 'log', 'setTimeout', 'clearTimeout']) {
  let constructs
  try { new globalThis[n](); constructs = 'constructed' } catch (e) { constructs = e.name }
  fnShape[n] = { own: Object.getOwnPropertyNames(globalThis[n]).sort(), constructs }
}
fnShape.agent = { own: Object.getOwnPropertyNames(agent).sort() }
fnShape.workflow = { own: Object.getOwnPropertyNames(workflow).sort() }
fnShape.budget = ['spent', 'remaining'].map((k) => 'prototype' in budget[k])
fnShape.console = ['log', 'warn'].map((k) => 'prototype' in console[k])
const desc = (k) => { const d = Object.getOwnPropertyDescriptor(globalThis, k); return d ? { writable: d.writable, enumerable: d.enumerable, configurable: d.configurable, type: typeof d.value } : 'absent' }
return { frozen, protoNotFrozen, hidden, attempts, fnShape, globals: { then: desc('then'), Error: desc('Error'), thenIn: 'then' in globalThis } }
