export const meta = { name: 'realm-phase-title-coercion', description: 'phase() titles are coerced like prompts' }
phase(42)
const a = await agent('p0')
phase({})
const b = await agent('p1')
phase('')
const c = await agent('p2')
phase(null)
const d = await agent('p3')
return [a, b, c, d]
