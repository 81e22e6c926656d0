export const meta = { name: 'agents-definition-shapes-call', description: 'A project agent definition sets the call model; no agentType and general-purpose inherit the main model' }
const a = await agent('audit this', { label: 'auditor', agentType: 'security-auditor' })
const b = await agent('plain call', { label: 'plain' })
const c = await agent('general call', { label: 'general', agentType: 'general-purpose' })
return [a, b, c]
