export const meta = { name: 'realm-unhandled-rejection-continues', description: 'an unhandled rejection while the run continues' }
Promise.reject(new Error('floating'))
;(async () => { throw new Error('async floating') })()
await new Promise((r) => setTimeout(r, 50))
const a = await agent('after')
log('still running')
return a
