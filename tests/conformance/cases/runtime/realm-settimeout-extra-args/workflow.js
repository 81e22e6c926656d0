export const meta = { name: 'realm-settimeout-extra-args', description: 'setTimeout passes no extra arguments to its callback' }
const got = await new Promise(r => setTimeout((...a) => r(a.length), 0, 'x', 2, { k: 1 }))
const h = setTimeout(() => {}, 10)
clearTimeout(h)
let fired = false
clearTimeout(setTimeout(() => { fired = true }, 5))
await new Promise(r => setTimeout(r, 30))
const order = await new Promise(r => { const o = []; setTimeout(() => o.push('b'), 2); setTimeout(() => o.push('a'), 1); setTimeout(() => o.push('c'), 2); setTimeout(() => r(o), 20) })
const thisValue = await new Promise(r => setTimeout(function () { r(this === undefined ? 'undefined' : typeof this) }, 0))
return { extraArgsReceived: got, handleType: typeof h, clearedFired: fired, order, thisValue, clearBad: String(clearTimeout('nope')), negativeDelay: await new Promise(r => setTimeout(() => r('ran'), -5)) }
