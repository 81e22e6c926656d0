export const meta = { name: 'agent-phase-option-coercion', description: 'the phase option coerced' }
const r = []
for (const p of [42, {}, null, '', '  sp  ', ['a', 'b'], Symbol('s'), true]) {
  try { r.push(await agent('p', { phase: p, label: 'x' })) } catch (e) { r.push('threw: ' + e.name) }
}
return r
