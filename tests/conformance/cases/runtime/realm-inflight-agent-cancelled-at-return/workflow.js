export const meta = { name: 'realm-inflight-agent-cancelled-at-return', description: 'An agent still running when the workflow returns is cancelled; the run does not wait for it' }
agent('long running', { label: 'long' }).then(r => log('long resolved ' + r), e => log('long rejected'))
await new Promise(r => setTimeout(r, 3000))
log('returning after 3s')
return 'done'
