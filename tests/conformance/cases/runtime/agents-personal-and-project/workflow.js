export const meta = { name: 'agents-personal-and-project', description: 'Personal agents resolve; a project agent of the same name wins over the personal one' }
async function tryType(t, label) {
  try { return await agent('probe ' + label, { label, agentType: t }) }
  catch (e) { const m = /agent type '([\s\S]*)' not found/.exec(e.message); return m ? 'not found: ' + m[1] : 'ERR ' + e.name + ': ' + e.message }
}
const out = {}
for (const [i, t] of ['personal-only', 'shared', 'project-only'].entries()) out[i + ':' + String(t)] = await tryType(t, 'L' + i)
return out
