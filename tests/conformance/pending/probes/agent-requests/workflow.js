export const meta = { name: 'agent-requests', description: 'Shows what each agent type sends to the model' }
const TYPES = [null, "security-auditor", "general-purpose", "Explore", "Plan", "claude", "statusline-setup", "bg", "both", "color", "dis", "dis-list", "initp", "iso", "maxturns", "mem", "perm", "skills", "t-empty", "t-emptylist", "t-flow", "t-list", "t-lower", "t-pattern", "t-space", "t-star", "t-subagents", "t-unknown"]
const out = {}
for (const [i, t] of TYPES.entries()) {
  try { out[i + ':' + String(t)] = await agent('probe ' + i, { label: 'L' + i + ' ' + String(t), agentType: t }) }
  catch (e) { out[i + ':' + String(t)] = e.name + ': ' + e.message }
}
return out
