export const meta = { name: 'realm-settimeout-edge-cases', description: 'setTimeout and clearTimeout edge cases' }
const h1 = setTimeout(() => {}, 1000), h2 = setTimeout(() => {}, 1000)
const handles = { type: typeof h1, integer: Number.isInteger(h1), increasing: h2 > h1 }
const clearReturns = String(clearTimeout(h1)); clearTimeout(h2)
let clearUnknown = 'no throw'; try { clearTimeout('nope'); clearTimeout(); clearTimeout({}); clearTimeout(h1) } catch (e) { clearUnknown = 'threw' }
let nonFunction = 'no throw'; try { nonFunction += ' ' + [typeof setTimeout('log("string callback ran")', 1), typeof setTimeout(), typeof setTimeout(5, 1)].join(',') } catch (e) { nonFunction = 'threw' }
const order = []
await new Promise((r) => { setTimeout(() => order.push('thirty'), 30); setTimeout(() => order.push('negative'), -5); setTimeout(() => order.push('nan'), NaN); setTimeout(() => order.push('string10'), '10'); setTimeout(() => order.push('zero'), 0); setTimeout(() => order.push('none')); setTimeout(r, 80) })
const cleared = []
await new Promise((r) => { const t = setTimeout(() => cleared.push('should not run'), 5); clearTimeout(t); setTimeout(r, 40) })
return { handles, clearReturns, clearUnknown, nonFunction, order, cleared }
