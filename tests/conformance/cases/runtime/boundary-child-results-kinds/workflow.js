export const meta = { name: 'boundary-child-results-kinds', description: 'How a child result is copied back to the parent: the same deep own-property copy' }
function d(v) {
  const t = typeof v
  if (t === 'symbol' || t === 'function' || t === 'undefined') return t
  if (t === 'bigint') return 'bigint ' + String(v)
  if (t === 'number') return Object.is(v, -0) ? 'number -0' : 'number ' + String(v)
  if (v === null || t !== 'object') return v
  const p = Object.getPrototypeOf(v)
  const proto = p === null ? 'null' : p === Object.prototype ? 'Object' : p === Array.prototype ? 'Array' : 'other'
  if (Array.isArray(v)) { const items = []; for (let i = 0; i < v.length; i++) items.push(i in v ? d(v[i]) : 'hole'); return { array: items, proto } }
  const o = { proto, tag: Object.prototype.toString.call(v) }
  for (const k of Reflect.ownKeys(v)) { let x; try { x = d(v[k]) } catch (e) { x = 'getter threw' } o[typeof k === 'symbol' ? 'symbol-key' : 'key ' + k] = x }
  return o
}
const KS = ['date', 'map', 'regexp', 'boxedString', 'toJSON', 'getterThrows', 'symbolValue', 'symbolKey', 'negativeZero', 'nan', 'infinities', 'undefinedInArray', 'undefinedProperty', 'sparse', 'classInstance', 'functionProperty', 'functionInArray', 'error', 'typedArray', 'nullPrototype', 'arrayExtraProperty', 'nonEnumerable', 'protoKey', 'bigint', 'symbol', 'negZero', 'fn']
const out = {}
for (const k of KS) out[k] = d(await workflow('make-value', { k }))
return out
