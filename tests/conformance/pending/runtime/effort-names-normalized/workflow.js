export const meta = { name: 'effort-names-normalized', description: 'Effort names are case-insensitive and String()-coerced; an empty effort sends none' }
const KEY = 'effort'
const VALS = ['low', 'medium', 'high', 'max', 'xhigh', 'LOW', 'High', ['low'], '']
const out = []
for (const [i, v] of VALS.entries()) {
  try { out.push(await agent('probe ' + i, { label: 'L' + i, [KEY]: v })) }
  catch (e) { out.push('ERR ' + e.name) }
}
return out
