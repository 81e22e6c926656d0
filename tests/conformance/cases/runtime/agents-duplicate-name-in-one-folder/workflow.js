export const meta = { name: 'agents-duplicate-name-in-one-folder', description: 'Two files in one folder declaring the same name: the last in sorted file-name order wins' }
async function tryType(t, label) {
  try { return await agent('probe ' + label, { label, agentType: t }) }
  catch (e) { const m = /agent type '([\s\S]*)' not found/.exec(e.message); return m ? 'not found: ' + m[1] : 'ERR ' + e.name + ': ' + e.message }
}
const out = {}
for (const [i, t] of ['q1', 'q2'].entries()) out[i + ':' + String(t)] = await tryType(t, 'L' + i)
return out
