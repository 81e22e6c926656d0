export const meta = { name: 'effort-invalid', description: 'Shows the effort sent for invalid effort values' }
const VALS = [' low', 'minimal', 'none', 'ultra', 'auto', 'ludicrous', 5, true, {}, null, undefined]
const out = []
for (const [i, v] of VALS.entries()) out.push(await agent('probe ' + i, { label: 'L' + i, effort: v }))
return out
