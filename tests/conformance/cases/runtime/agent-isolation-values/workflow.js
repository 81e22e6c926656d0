export const meta = { name: 'agent-isolation-values', description: 'isolation option values' }
const out = {}
for (const [k, v] of [['bogus', 'bogus'], ['num', 5], ['nul', null], ['empty', ''], ['upper', 'WORKTREE'], ['none', 'none']]) {
  try { out[k] = await agent('p-' + k, { isolation: v, label: k }) } catch (e) { out[k] = 'threw: ' + e.name + ': ' + e.message }
}
return out
