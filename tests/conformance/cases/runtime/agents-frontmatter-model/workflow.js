export const meta = { name: 'agents-frontmatter-model', description: 'The frontmatter model is normalized like the model option' }
async function tryType(t, label) {
  try { return await agent('probe ' + label, { label, agentType: t }) }
  catch (e) { const m = /agent type '([\s\S]*)' not found/.exec(e.message); return m ? 'not found: ' + m[1] : 'ERR ' + e.name + ': ' + e.message }
}
const out = {}
for (const [i, t] of ['m-sonnet', 'm-opus', 'm-haiku', 'm-inherit', 'm-upper', 'm-best', 'm-opusplan', 'm-gpt-5', 'm-5'].entries()) out[i + ':' + String(t)] = await tryType(t, 'L' + i)
return out
