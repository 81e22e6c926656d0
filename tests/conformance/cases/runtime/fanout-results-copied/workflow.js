export const meta = { name: 'fanout-results-copied', description: 'parallel() and pipeline() results cross the boundary copy; values between stages do not' }
const o = { a: 1 }
const d = new Date(0)
const r = await parallel([() => o, () => d, () => ({ f() {}, a: 1 }), () => new Map([[1, 2]]), () => () => 1, () => 5n, () => [() => 1, 2], () => undefined, () => -0, () => ({ get g() { throw new Error('x') }, ok: 1 })])
const p = await pipeline([o, 1, 2], (x) => x, (x) => (x === 1 ? () => 1 : x === 2 ? d : x))
const p0 = await pipeline([o, () => 1, d])
const seen = []
const f = { a: 1, fn() {} }
await pipeline([1], () => f, (x) => { seen.push(x === f, typeof x.fn); return 1 })
const big = await (async () => { try { await parallel([() => new Array(5000).fill(0)]); return 'resolved' } catch (e) { return 'threw ' + e.name + ': ' + e.message } })()
return {
  sameObject: r[0] === o, dateIsDate: r[1] instanceof Date, plainKeys: Object.keys(r[2]), mapIsMap: r[3] instanceof Map, fnSlot: typeof r[4], big: typeof r[5], arr: r[6].map((v) => typeof v), undef: r[7] === undefined, negZero: Object.is(r[8], -0), throwingGetter: r[9],
  sameRealm: r[2] instanceof Object,
  pipeSame: p[0] === o, pipeFn: typeof p[1], pipeDate: p[2] instanceof Date,
  noStageSame: p0[0] === o, noStageFn: typeof p0[1], noStageDate: p0[2] instanceof Date,
  betweenStages: seen, arrayBound: big,
}
