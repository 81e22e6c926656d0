export const meta = { name: 'boundary-child-graph-identity', description: 'The child copy keeps cycles and shared references and never hands over the original objects' }
const o = { a: 1 }
o.self = o
const sh = { k: 1 }
let deep = 1
for (let i = 0; i < 1000; i++) deep = { a: deep }
const r = await workflow('child-identity', { c: o, s: { x: sh, y: sh }, g: { a: 1, get g() { throw new Error('boom') }, b: 2 }, tj: { toJSON: 5, a: 1 }, deep })
return { argCycle: r.argCycle, argShared: r.argShared, getterKeys: r.getterKeys, toJSONKeys: r.toJSONKeys, depth: r.depth, resultCycle: r.made.c.self === r.made.c, resultShared: r.made.s.x === r.made.s.y, sameObject: r.made.c === o }
