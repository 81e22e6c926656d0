export const meta = { name: 'effort-names-normalized', description: 'Effort names are case-insensitive and String()-coerced; a numeric effort sends none' }
const KEY = 'effort'
const VALS = ['low', 'medium', 'high', 'max', 'xhigh', 'LOW', 'High', ['low'], 5, '5', 1.5]
const out = []
for (const [i, v] of VALS.entries()) {
  try { out.push(await agent('probe ' + i, { label: 'L' + i, [KEY]: v })) }
  catch (e) { out.push('ERR ' + e.name) }
}
return out
