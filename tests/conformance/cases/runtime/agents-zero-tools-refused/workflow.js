export const meta = { name: 'agents-zero-tools-refused', description: 'A definition whose tools all fail to resolve is refused before the provider; an explicitly empty list runs' }
function shape(e) {
  if (e === null || typeof e !== 'object') return { thrown: typeof e }
  const p = Object.getPrototypeOf(e)
  return { instanceofError: e instanceof Error, proto: p === null ? 'null' : p === Error.prototype ? 'Error.prototype' : p === TypeError.prototype ? 'TypeError.prototype' : 'other', name: e.name, ownKeys: Object.getOwnPropertyNames(e), enumerableKeys: Object.keys(e), messageType: typeof e.message, stackType: typeof e.stack, toStringOwn: Object.prototype.hasOwnProperty.call(e, 'toString'), string: String(e).split('\n')[0] }
}
const out = {}
try { out.lower = await agent('a', { label: 'lower', agentType: 't-lower' }) } catch (e) { out.lower = { ...shape(e), message: e.message } }
out.empty = await agent('b', { label: 'empty', agentType: 't-empty' })
out.someUnknown = await agent('c', { label: 'some', agentType: 't-unknown' })
out.disallowAll = await agent('d', { label: 'disall', agentType: 't-read', disallowedTools: ['Read'] })
return out
