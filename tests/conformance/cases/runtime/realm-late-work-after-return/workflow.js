export const meta = { name: 'realm-late-work-after-return', description: 'work left after return' }
setTimeout(() => log('timer after return'), 30)
;(async () => { await null; await null; await null; log('microtask after return') })()
Promise.reject(new Error('late rejection'))
log('before return')
return 'done'
