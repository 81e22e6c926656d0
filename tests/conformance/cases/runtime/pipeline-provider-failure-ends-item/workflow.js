export const meta = { name: 'pipeline-provider-failure-ends-item', description: 'a provider failure in stage 1 ends the item (null skips)' }
const calls = []
const r = await pipeline(['a', 'b'], (x) => agent('s1 ' + x, { label: 's1-' + x }), (prev, x) => { calls.push(x); return agent('s2 ' + x, { label: 's2-' + x }) })
return { r, calls }
