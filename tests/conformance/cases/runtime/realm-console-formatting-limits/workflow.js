export const meta = { name: 'realm-console-formatting-limits', description: 'console.* at the limits of the copy' }
let deep = 'x'; for (let i = 0; i < 30000; i++) deep = { a: deep }
console.log(deep)
console.log(new Array(4097).fill(0))
console.log({ big: [new Array(4097).fill(1)] })
console.log(new Proxy({ a: 1 }, { ownKeys() { throw new Error('trap') } }))
const r = Proxy.revocable({}, {}); r.revoke()
console.log(r.proxy)
console.log({ a: 10n })
console.log([Symbol('x')])
console.log(new Array(4096).fill(0).length)
setTimeout(() => log('a timer after the return'), 10)
agent('after return').then(() => log('an agent after the return'))
return 'ok'
