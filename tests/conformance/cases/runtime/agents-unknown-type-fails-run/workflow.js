export const meta = { name: 'agents-unknown-type-fails-run', description: 'An uncaught unknown agentType fails the run without a provider call' }
await agent('x', { agentType: 'missing-type' })
return 'unreachable'
