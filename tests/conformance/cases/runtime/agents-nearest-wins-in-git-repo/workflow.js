export const meta = { name: 'agents-nearest-wins-in-git-repo', description: 'In a git repository agents are read from the repository root down to the working directory; nearest wins' }
async function tryType(t, label) {
  try { return await agent('probe ' + label, { label, agentType: t }) }
  catch (e) { const m = /agent type '([\s\S]*)' not found/.exec(e.message); return m ? 'not found: ' + m[1] : 'ERR ' + e.name + ': ' + e.message }
}
const out = {}
for (const [i, t] of ['above', 'rootonly', 'dup', 'midonly', 'deeponly', 'pdup', 'personal-only'].entries()) out[i + ':' + String(t)] = await tryType(t, 'L' + i)
return out
