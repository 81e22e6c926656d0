export const meta = { name: 'agents-options-override-definition', description: 'agent() options win over the definition: model and effort; schema still works with an agent type' }
const S = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] }
const out = {}
out.plain = await agent('p0', { label: 'cfg-plain', agentType: 'cfg' })
out.model = await agent('p1', { label: 'cfg-model', agentType: 'cfg', model: 'sonnet' })
out.effort = await agent('p2', { label: 'cfg-effort', agentType: 'cfg', effort: 'low' })
out.inherit = await agent('p3', { label: 'cfg-inherit', agentType: 'cfg', model: 'inherit' })
out.schema = await agent('p4', { label: 'schema', agentType: 'cfg', schema: S })
out.gpModel = await agent('p5', { label: 'gp', agentType: 'general-purpose', model: 'haiku' })
out.statusModel = await agent('p6', { label: 'status', agentType: 'statusline-setup', model: 'opus' })
return out
