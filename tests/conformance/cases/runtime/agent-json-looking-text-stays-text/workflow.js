export const meta = { name: 'agent-json-looking-text-stays-text', description: 'a reply that looks like JSON stays text without a schema' }
const a = await agent('j', { label: 'j' })
return { type: typeof a, a, keyOrder: Object.keys({ b: 1, 2: 1, a: 1, 1: 1, '-1': 1 }), result: { b: 1, 10: 2, a: 3, 2: 4 } }
