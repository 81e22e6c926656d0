export const meta = { name: 'agents-type-coercion', description: 'agentType values are coerced with String(); null and undefined mean no agent type' }
async function tryType(t, label) {
  try { return await agent('probe ' + label, { label, agentType: t }) }
  catch (e) { const m = /agent type '([\s\S]*)' not found/.exec(e.message); return m ? 'not found: ' + m[1] : 'ERR ' + e.name + ': ' + e.message }
}
const out = {}
for (const [i, t] of ['', null, undefined, 42, 0, true, {}, ['general-purpose'], NaN, 'general-purpose'].entries()) out[i + ':' + String(t)] = await tryType(t, 'L' + i)
return out
