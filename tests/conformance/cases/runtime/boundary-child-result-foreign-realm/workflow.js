export const meta = { name: 'boundary-child-result-foreign-realm', description: 'A child\'s result is made of the child realm\'s objects, not the parent\'s' }
function info(v) { const p = Object.getPrototypeOf(v); return { parentObjectProto: p === Object.prototype, parentArrayProto: p === Array.prototype, instanceofObject: v instanceof Object, instanceofArray: v instanceof Array, isArray: Array.isArray(v), ctorName: v.constructor && v.constructor.name, protoOfProtoNull: p !== null && Object.getPrototypeOf(p) === null } }
const a = await workflow('child-ret', { k: 'obj' })
const b = await workflow('child-ret', { k: 'obj' })
const arr = await workflow('child-ret', { k: 'arr' })
const s = await agent('s', { schema: { type: 'object', properties: { xs: { type: 'array' } } } })
return { childObject: info(a), childArray: info(arr), childNested: info(a.inner), sameProtoAcrossChildren: Object.getPrototypeOf(a) === Object.getPrototypeOf(b), agentObject: info(s), agentArray: info(s.xs), runArgs: info(args), runArgsArray: info(args.list) }
