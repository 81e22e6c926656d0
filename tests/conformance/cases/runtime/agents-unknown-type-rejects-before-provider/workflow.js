export const meta = { name: 'agents-unknown-type-rejects-before-provider', description: 'An unknown agentType rejects before any provider call with a plain error object' }
function shape(e) {
  if (e === null || typeof e !== 'object') return { thrown: typeof e }
  const p = Object.getPrototypeOf(e)
  return { instanceofError: e instanceof Error, proto: p === null ? 'null' : p === Error.prototype ? 'Error.prototype' : p === TypeError.prototype ? 'TypeError.prototype' : 'other', name: e.name, ownKeys: Object.getOwnPropertyNames(e), enumerableKeys: Object.keys(e), messageType: typeof e.message, stackType: typeof e.stack, toStringOwn: Object.prototype.hasOwnProperty.call(e, 'toString'), string: String(e).split('\n')[0] }
}
log('before')
let out
try { await agent('x', { label: 'u', agentType: 'no-such-agent' }); out = 'resolved' }
catch (e) { out = { ...shape(e), message: e.message } }
log('after')
return out
