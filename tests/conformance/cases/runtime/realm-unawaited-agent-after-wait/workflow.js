export const meta = { name: 'realm-unawaited-agent-after-wait', description: 'A pending agent() that had time to start is still dropped when the workflow returns' }
agent('slow forgotten', { label: 'sf' })
await new Promise(r => setTimeout(r, 50))
log('returning after 50ms')
return 'done'
