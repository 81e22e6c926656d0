export const meta = { name: 'boundary-agent-result-array-bound', description: 'A structured agent result with an array longer than 4,096 rejects the agent() call' }
function shape(e) {
  if (e === null || typeof e !== 'object') return { thrown: typeof e }
  const p = Object.getPrototypeOf(e)
  return { instanceofError: e instanceof Error, proto: p === null ? 'null' : p === Error.prototype ? 'Error.prototype' : p === TypeError.prototype ? 'TypeError.prototype' : 'other', name: e.name, ownKeys: Object.getOwnPropertyNames(e), enumerableKeys: Object.keys(e), messageType: typeof e.message, stackType: typeof e.stack, toStringOwn: Object.prototype.hasOwnProperty.call(e, 'toString'), string: String(e).split('\n')[0] }
}
const S = { type: 'object' }
async function t(f) { try { return await f() } catch (e) { return { ...shape(e), message: e.message } } }
return {
  r4096: await t(async () => (await agent('big 4096', { schema: S })).items.length),
  r4097: await t(() => agent('big 4097', { schema: S })),
  nested: await t(() => agent('nested', { schema: S })),
  text: await t(async () => (await agent('long text')).length),
}
