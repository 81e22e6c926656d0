export const meta = { name: 'agents-name-resolution', description: 'agentType matches the frontmatter name exactly; colon names are not loaded' }
async function tryType(t, label) {
  try { return await agent('probe ' + label, { label, agentType: t }) }
  catch (e) { const m = /agent type '([\s\S]*)' not found/.exec(e.message); return m ? 'not found: ' + m[1] : 'ERR ' + e.name + ': ' + e.message }
}
const out = {}
for (const [i, t] of ['fm-name', 'file-name', 'FM-NAME', 'Fm-Name', 'explore', 'EXPLORE', 'plan', 'General-Purpose', 'plug:helper', 'plug', 'helper', ' fm-name', 'fm-name ', 'sub/nested', 'nested', 'spaced name', 'Upper-Name', 'upper-name'].entries()) out[i + ':' + String(t)] = await tryType(t, 'L' + i)
return out
