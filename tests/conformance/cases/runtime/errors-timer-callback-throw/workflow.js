export const meta = { name: 'errors-timer-callback-throw', description: 'a throw inside a timer callback' }
setTimeout(() => { throw new Error('in timer') }, 10)
await new Promise((r) => setTimeout(r, 200))
log('still running')
return 'survived'
