export const meta = { name: 'realm-unawaited-agent-never-dispatched', description: 'agent() calls still pending when the workflow returns never reach the provider' }
agent('fire and forget 1', { label: 'ff1' })
agent('fire and forget 2', { label: 'ff2' }).then(r => log('ff2 resolved ' + r))
parallel([() => agent('ff par', { label: 'ffp' })])
log('returning')
return 'done'
