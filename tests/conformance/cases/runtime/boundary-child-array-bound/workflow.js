export const meta = { name: 'boundary-child-array-bound', description: 'Child args and child results carry arrays of at most 4,096 elements' }
function shape(e) {
  if (e === null || typeof e !== 'object') return { thrown: typeof e }
  const p = Object.getPrototypeOf(e)
  return { instanceofError: e instanceof Error, proto: p === null ? 'null' : p === Error.prototype ? 'Error.prototype' : p === TypeError.prototype ? 'TypeError.prototype' : 'other', name: e.name, ownKeys: Object.getOwnPropertyNames(e), enumerableKeys: Object.keys(e), messageType: typeof e.message, stackType: typeof e.stack, toStringOwn: Object.prototype.hasOwnProperty.call(e, 'toString'), string: String(e).split('\n')[0] }
}
async function t(f) { try { return await f() } catch (e) { return { ...shape(e), message: e.message } } }
return {
  args4096: await t(() => workflow('child-big', { v: new Array(4096).fill(0) })),
  args4097: await t(() => workflow('child-big', { v: new Array(4097).fill(0) })),
  argsNested: await t(() => workflow('child-big', { v: [1], deep: { x: [new Array(5000)] } })),
  result4096: await t(async () => (await workflow('child-big', { make: 4096 })).length),
  result4097: await t(() => workflow('child-big', { make: 4097 })),
}
