export const meta = { name: 'realm-settimeout-large-delays', description: 'setTimeout delays past 2^31 and clearTimeout with a string handle' }
const order = []
setTimeout(() => order.push('2^31'), 2 ** 31)
setTimeout(() => order.push('2^32+5'), 2 ** 32 + 5)
setTimeout(() => order.push('Infinity'), Infinity)
setTimeout(() => order.push('1e10'), 1e10)
const h = setTimeout(() => order.push('cleared-by-string'), 10)
clearTimeout(String(h))
const h2 = setTimeout(() => order.push('cleared-by-object'), 10)
clearTimeout({ valueOf() { return h2 } })
setTimeout(() => order.push('20'), 20)
await new Promise((r) => setTimeout(r, 300))
return { order, handleType: typeof h }
