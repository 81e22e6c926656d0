export const meta = { name: 'fanout-start-deferred', description: 'when parallel() thunks and pipeline() stages first run' }
// Neither inside the call nor after 200 microtasks: like a 0 ms timer made at the call.
async function ticksUntil(start) {
  const calls = []
  const p = start(calls)
  const sync = calls.length
  let i = 0
  for (; i < 200 && calls.length === 0; i++) await null
  const r = { sync, ranWithin200Microtasks: calls.length > 0 }
  await p
  r.calls = calls
  return r
}
const par = await ticksUntil((c) => parallel([() => c.push('t0'), () => c.push('t1')]))
const pipe = await ticksUntil((c) => pipeline([1, 2], (x) => c.push('s' + x)))
const nested = await ticksUntil((c) => parallel([() => parallel([() => c.push('inner')])]))
const order = []
const pa = parallel([() => order.push('thunk')])
order.push('after call')
await pa
const timers = []
setTimeout(() => timers.push('timer0 before'), 0)
const p = parallel([() => timers.push('thunk')])
setTimeout(() => timers.push('timer0 after'), 0)
await p
await new Promise((r) => setTimeout(r, 10))
const mixed = []
const p3 = pipeline([1], (x) => { mixed.push('stage1'); return x }, (x) => { mixed.push('stage2'); return x })
const pp = parallel([() => mixed.push('par thunk')])
setTimeout(() => mixed.push('timer'), 0)
await Promise.all([p3, pp])
await new Promise((r) => setTimeout(r, 10))
const logged = parallel([() => log('in thunk')])
log('after parallel()')
await logged
return { par, pipe, nested, order, timers, mixed }
