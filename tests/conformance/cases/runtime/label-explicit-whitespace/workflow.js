export const meta = { name: 'label-explicit-whitespace', description: 'Explicit labels: whitespace runs collapse to one space and the label is trimmed; never truncated' }
const VALS = ['a\nb', 'a\tb', '  padded  ', '', '   ', '\n', 'a\r\nb', 'a\u2028b', 'a\u00a0b', 'a  \n\t b', 'x😀y', 'L'.repeat(200)]
const out = []
for (const [i, v] of VALS.entries()) out.push(await agent('prompt ' + i, { label: v }))
return out
