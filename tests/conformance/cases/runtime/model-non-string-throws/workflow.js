export const meta = { name: 'model-non-string-throws', description: 'A non-string model throws a TypeError-named host error before any provider call' }
function shape(e) {
  if (e === null || typeof e !== 'object') return { thrown: typeof e }
  const p = Object.getPrototypeOf(e)
  return { instanceofError: e instanceof Error, proto: p === null ? 'null' : p === Error.prototype ? 'Error.prototype' : p === TypeError.prototype ? 'TypeError.prototype' : 'other', name: e.name, ownKeys: Object.getOwnPropertyNames(e), enumerableKeys: Object.keys(e), messageType: typeof e.message, stackType: typeof e.stack, toStringOwn: Object.prototype.hasOwnProperty.call(e, 'toString'), string: String(e).split('\n')[0] }
}
const out = []
for (const v of [42, ['haiku'], {}, true]) {
  try { await agent('x', { model: v }); out.push('resolved') } catch (e) { out.push(shape(e)) }
}
return out
