export const meta = { name: 'agents-option-check-order', description: 'which invalid agent() option is reported first' }
function which(e) {
  const m = String(e.message)
  if (m.includes('disallowedTools')) return 'disallowedTools'
  if (m.includes('agent type') || m.includes('agentType')) return 'agentType'
  if (m.includes('schema') || m.includes('WeakMap')) return 'schema'
  if (m.includes('model') || m.includes('toLowerCase')) return 'model'
  return 'other: ' + m
}
async function first(opts) { try { await agent('order probe ' + Object.keys(opts).join('+'), opts); return 'ran' } catch (e) { return which(e) } }
return {
  disallowedToolsAndAgentType: await first({ disallowedTools: 'Bash', agentType: 'no-such-type' }),
  agentTypeAndSchema: await first({ agentType: 'no-such-type', schema: 5 }),
  agentTypeAndModel: await first({ agentType: 'no-such-type', model: 5 }),
  schemaAndModel: await first({ schema: 5, model: 5 }),
  disallowedToolsAndSchema: await first({ disallowedTools: 5, schema: 5 }),
  disallowedToolsAndModel: await first({ disallowedTools: 5, model: 5 }),
}
