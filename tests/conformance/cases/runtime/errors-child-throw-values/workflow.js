export const meta = { name: 'errors-child-throw-values', description: 'A child\'s throw reaches the parent as a null-prototype error object; non-Error values are wrapped' }
function shape(e) {
  if (e === null || typeof e !== 'object') return { thrown: typeof e }
  const p = Object.getPrototypeOf(e)
  return { instanceofError: e instanceof Error, proto: p === null ? 'null' : p === Error.prototype ? 'Error.prototype' : p === TypeError.prototype ? 'TypeError.prototype' : 'other', name: e.name, ownKeys: Object.getOwnPropertyNames(e), enumerableKeys: Object.keys(e), messageType: typeof e.message, stackType: typeof e.stack, toStringOwn: Object.prototype.hasOwnProperty.call(e, 'toString'), string: String(e).split('\n')[0] }
}
const out = {}
for (const k of ['error', 'typeError', 'custom', 'withProps', 'string', 'number', 'object', 'objectWithMessage', 'null', 'undefined', 'rejectObject']) {
  try { await workflow('child-throw', { k }); out[k] = 'resolved' }
  catch (e) { out[k] = { ...shape(e), message: e.message, stackFirstLine: typeof e.stack === 'string' ? e.stack.split('\n')[0] : null, code: e.code } }
}
return out
