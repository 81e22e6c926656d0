export const meta = { name: 'errors-host-error-shape', description: 'What workflow code sees when the host rejects: a null-prototype error object' }
// Claude's list of available workflows also names its bundled ones and this file: only the case's own
// children (child-*) are kept. The parser's own words are masked: Claude's parser and V8 word errors differently.
function shown(m) {
  return m
    .replace(/Available: (.*)$/, (_, l) => 'Available: ' + l.split(', ').filter((n) => n.startsWith('child-')).join(', '))
    .replace(/Script parse error: [^\n]*? \((\d+:\d+)\)/, 'Script parse error: <parser message> ($1)')
}
function shape(e) {
  if (e === null || typeof e !== 'object') return { thrown: typeof e }
  const p = Object.getPrototypeOf(e)
  return { instanceofError: e instanceof Error, proto: p === null ? 'null' : p === Error.prototype ? 'Error.prototype' : p === TypeError.prototype ? 'TypeError.prototype' : 'other', name: e.name, ownKeys: Object.getOwnPropertyNames(e), enumerableKeys: Object.keys(e), messageType: typeof e.message, stackType: typeof e.stack, toStringOwn: Object.prototype.hasOwnProperty.call(e, 'toString'), string: shown(String(e).split('\n')[0]) }
}
async function cap(f) { try { await f(); return 'resolved' } catch (e) { return shape(e) } }
async function msg(f) { try { await f(); return 'resolved' } catch (e) { return e.message } }
const S = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }
const CALLS = {
  schemaInvalid: () => agent('a', { schema: { type: 'object', properties: { a: { type: 'bogus' } } } }),
  schemaNotObject: () => agent('a', { schema: 'string' }),
  schemaUnusableRoot: () => agent('a', { schema: { type: 'array' } }),
  retryCap: () => agent('bad output', { schema: S }),
  noStructuredOutput: () => agent('no structured', { schema: S }),
  unknownAgentType: () => agent('a', { agentType: 'nope' }),
  disallowedToolsString: () => agent('a', { disallowedTools: 'Bash' }),
  parallelPromise: () => parallel([Promise.resolve(1)]),
  parallelNotArray: () => parallel('x'),
  parallelNumber: () => parallel([1]),
  pipelineNotArray: () => pipeline('x', x => x),
  pipelineStageNotFunction: () => pipeline([1], 5),
  workflowMissing: () => workflow('no-such-child', {}),
  workflowNotString: () => workflow(5, {}),
  grandchild: () => workflow('child-nests', {}),
  childSyntaxError: () => workflow('child-syntax', {}),
}
const out = {}
for (const k of Object.keys(CALLS)) out[k] = await cap(CALLS[k])
return out
