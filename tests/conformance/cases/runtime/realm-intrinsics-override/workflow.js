export const meta = { name: 'realm-intrinsics-override', description: 'which frozen prototype properties an inheriting object may still override' }
const TypedArray = Object.getPrototypeOf(Uint8Array)
const protos = { Object: Object.prototype, Array: Array.prototype, Function: Function.prototype, Error: Error.prototype, TypeError: TypeError.prototype, RangeError: RangeError.prototype, SyntaxError: SyntaxError.prototype, ReferenceError: ReferenceError.prototype, EvalError: EvalError.prototype, URIError: URIError.prototype, AggregateError: AggregateError.prototype, Promise: Promise.prototype, String: String.prototype, Number: Number.prototype, Boolean: Boolean.prototype, Symbol: Symbol.prototype, Map: Map.prototype, Set: Set.prototype, Date: Date.prototype, RegExp: RegExp.prototype, TypedArray: TypedArray.prototype, ArrayBuffer: ArrayBuffer.prototype, WeakMap: WeakMap.prototype }
// Keys that exist in both engines: an assignment on an object inheriting from the prototype that leaves an own property.
const assignable = {}
for (const [name, proto] of Object.entries(protos)) {
  const keys = []
  for (const key of Reflect.ownKeys(proto)) {
    if (typeof key === 'symbol') continue
    const o = Object.create(proto)
    try { o[key] = 1; if (Object.prototype.hasOwnProperty.call(o, key)) keys.push(key) } catch (e) {}
  }
  assignable[name] = keys.sort()
}
const d = Object.getOwnPropertyDescriptor(Object.prototype, 'toString')
const tamed = { kind: Object.keys(d).sort(), enumerable: d.enumerable, configurable: d.configurable, getName: d.get.name, setName: d.set.name, getHasPrototype: 'prototype' in d.get, getLength: d.get.length, setLength: d.set.length, getterWithoutThis: typeof d.get.call(undefined) }
function t(f) { try { return f() } catch (e) { return 'threw ' + e.name } }
const o = {}
o.constructor = 5
const effects = {
  ownAfterAssign: Object.getOwnPropertyDescriptor(o, 'constructor'),
  frozenReceiver: t(() => { const f = Object.freeze({}); f.toString = 1; return 'assigned' }),
  onThePrototypeItself: t(() => { Object.prototype.toString = () => 'hacked'; return [String({}), typeof Object.prototype.toString] }),
  arrayToStringOnPrototype: t(() => { Array.prototype.toString = () => 'hacked'; return String([1, 2]) }),
  counter: t(() => { const c = {}; for (const w of ['a', 'constructor', 'toString', 'a']) c[w] = (c[w] || 0) + 1; return Object.keys(c).map((k) => k + '=' + typeof c[k]) }),
  literal: t(() => Object.keys({ toString: 1, constructor: 2 })),
  classFieldToString: t(() => { class A { constructor() { this.toString = () => 'A!' } }; return String(new A()) }),
  errorNameMessage: t(() => { const e = new TypeError('a'); e.name = 'N'; e.message = 'M'; return [String(e), Object.keys(e)] }),
  functionName: t(() => { const f = function named() {}; f.name = 'renamed'; return f.name }),
  hasOwnPropertyStillWorks: Object.prototype.hasOwnProperty.call({ a: 1 }, 'a'),
}
return { assignable, tamed, effects }
