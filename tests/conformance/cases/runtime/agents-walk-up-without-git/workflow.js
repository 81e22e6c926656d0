export const meta = { name: 'agents-walk-up-without-git', description: 'Outside a git repository agents are read from every ancestor directory; nearest wins' }
async function tryType(t, label) {
  try { return await agent('probe ' + label, { label, agentType: t }) }
  catch (e) { const m = /agent type '([\s\S]*)' not found/.exec(e.message); return m ? 'not found: ' + m[1] : 'ERR ' + e.name + ': ' + e.message }
}
const out = {}
for (const [i, t] of ['top', 'mid', 'dup'].entries()) out[i + ':' + String(t)] = await tryType(t, 'L' + i)
return out
