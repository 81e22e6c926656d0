export const meta = { name: 'agents-builtin-types', description: 'Built-in agent types that a workflow may name' }
async function tryType(t, label) {
  try { return await agent('probe ' + label, { label, agentType: t }) }
  catch (e) { const m = /agent type '([\s\S]*)' not found/.exec(e.message); return m ? 'not found: ' + m[1] : 'ERR ' + e.name + ': ' + e.message }
}
const out = {}
for (const [i, t] of ['general-purpose', 'Explore', 'Plan', 'claude', 'statusline-setup', 'output-style-setup', 'claude-code-guide', 'code-reviewer', 'Bash', 'fork', 'worker', 'workflow'].entries()) out[i + ':' + String(t)] = await tryType(t, 'L' + i)
return out
