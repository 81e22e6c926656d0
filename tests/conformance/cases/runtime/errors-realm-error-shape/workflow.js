export const meta = { name: 'errors-realm-error-shape', description: 'The errors parallel(), pipeline(), workflow() and the boundary throw into workflow code' }
function shape(e) {
  if (e === null || typeof e !== 'object') return { thrown: typeof e }
  const p = Object.getPrototypeOf(e)
  return { instanceofError: e instanceof Error, proto: p === null ? 'null' : 'other', name: e.name, ownKeys: Object.getOwnPropertyNames(e), enumerableKeys: Object.keys(e), toStringOwn: Object.prototype.hasOwnProperty.call(e, 'toString'), string: String(e), stackFirstLine: String(e.stack).split('\n')[0], json: Object.keys(JSON.parse(JSON.stringify(e))) }
}
async function cap(f) { try { await f(); return 'resolved' } catch (e) { return shape(e) } }
const CALLS = {
  parallelPromise: () => parallel([Promise.resolve(1)]),
  parallelNotArray: () => parallel('x'),
  parallelNumber: () => parallel([1]),
  parallelTooMany: () => parallel(new Array(4097).fill(() => 1)),
  pipelineNotArray: () => pipeline('x', x => x),
  pipelineStageNotFunction: () => pipeline([1], 5),
  pipelineTooMany: () => pipeline(new Array(4097).fill(0)),
  workflowNotString: () => workflow(5, {}),
  workflowNull: () => workflow(null),
  workflowBadScriptPath: () => workflow({ scriptPath: 5 }),
  grandchild: () => workflow('child-nests', {}),
  childArgsTooMany: () => workflow('child-nests', { a: new Array(4097).fill(0) }),
  optionsTooMany: () => agent('x', { extra: new Array(4097).fill(0) }),
  agentResultTooMany: () => agent('big', { schema: { type: 'object' } }),
  emptyMessageChild: () => workflow('child-null', {}),
}
const out = {}
for (const k of Object.keys(CALLS)) out[k] = await cap(CALLS[k])
return out
