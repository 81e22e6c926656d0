export const meta = { name: 'pipeline-promise-items', description: 'pipeline() items that are promises or thenables' }
async function t(f) { try { return await f() } catch (e) { return 'threw: ' + e.name + ': ' + e.message } }
const seen = (prev, item, i) => [typeof prev, prev instanceof Promise, typeof item, item instanceof Promise, prev === item, i]
const order = []
let release
const slow = new Promise((r) => { release = r })
const ordered = pipeline([slow, 1, 2], (x, item, i) => { order.push('s1:' + i); return x }, (x, item, i) => { order.push('s2:' + i); return x })
setTimeout(() => release(0), 20)
return {
  stageArgs: await t(() => pipeline([Promise.resolve(5)], seen)),
  twoStages: await t(() => pipeline([Promise.resolve(5)], (p) => p, seen)),
  thenable: await t(() => pipeline([{ then(r) { r(7) } }], seen)),
  rejected: await t(() => pipeline([Promise.reject(new Error('item rejected')), 2], (p) => p)),
  noStages: await t(() => pipeline([Promise.resolve(5), 6])),
  noStagesRejected: await t(() => pipeline([Promise.reject(new Error('nope')), 1, Promise.resolve(2)])),
  thunkPromiseOfPromise: await t(() => parallel([() => Promise.resolve(Promise.resolve(9))])),
  ordered: await ordered,
  order,
}
