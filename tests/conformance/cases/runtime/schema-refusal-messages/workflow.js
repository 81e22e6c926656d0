export const meta = { name: 'schema-refusal-messages', description: 'Messages of refused schemas' }
const out = {}
for (const [k, s] of Object.entries({ empty: {}, rootArray: { type: 'array' }, badPropertyType: { type: 'object', properties: { a: { type: 'bogus' } } }, unknownKeyword: { type: 'object', foo: 1 }, arraySchema: [] })) {
  try { await agent('x', { schema: s }); out[k] = 'resolved' } catch (e) { out[k] = e.name + ': ' + e.message }
}
return out
