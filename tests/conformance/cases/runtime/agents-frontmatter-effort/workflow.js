export const meta = { name: 'agents-frontmatter-effort', description: 'The frontmatter effort applies when valid' }
async function tryType(t, label) {
  try { return await agent('probe ' + label, { label, agentType: t }) }
  catch (e) { const m = /agent type '([\s\S]*)' not found/.exec(e.message); return m ? 'not found: ' + m[1] : 'ERR ' + e.name + ': ' + e.message }
}
const out = {}
for (const [i, t] of ['e-low', 'e-max', 'e-medium'].entries()) out[i + ':' + String(t)] = await tryType(t, 'L' + i)
return out
