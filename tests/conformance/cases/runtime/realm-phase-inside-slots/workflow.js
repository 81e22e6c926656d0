export const meta = { name: 'realm-phase-inside-slots', description: 'phase() called inside parallel slots and pipeline stages' }
phase('Top')
const r = await parallel([
  async () => { phase('A'); return agent('a', { label: 'a' }) },
  async () => { await null; await null; return agent('b', { label: 'b' }) },
])
const after = await agent('after', { label: 'after' })
const p = await pipeline([1], (x) => { phase('Stage'); return agent('s' + x, { label: 's' }) })
const last = await agent('last', { label: 'last' })
return { r, after, p, last }
