export const meta = { name: 'label-explicit-coercion', description: 'Explicit labels: String() coercion; null and undefined fall back to the prompt' }
const VALS = [{}, [], ['x', 'y'], [1, [2, 3]], 42, 0, -0, true, false, NaN, 1.5e21, { toString() { return 'custom' } }, null, undefined]
const out = []
for (const [i, v] of VALS.entries()) out.push(await agent('prompt ' + i, { label: v }))
return out
