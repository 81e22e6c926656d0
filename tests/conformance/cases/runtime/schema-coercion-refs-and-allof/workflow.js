export const meta = { name: 'schema-coercion-refs-and-allof', description: 'top-level coercion through $ref, allOf and additionalProperties; an array root with an unknown keyword' }
const out = {}
async function t(k, f) { try { out[k] = await f() } catch (e) { out[k] = 'ERR ' + e.name + ': ' + String(e.message).slice(0, 200) } }
await t('arrayRootUnknownKw', () => agent('x', { schema: { type: 'array', foo: 1 } }))
await t('refInt', () => agent('refint', { schema: { type: 'object', properties: { n: { $ref: '#/$defs/i' } }, required: ['n'], $defs: { i: { type: 'integer' } } } }))
await t('refStr', () => agent('refstr', { schema: { type: 'object', properties: { n: { $ref: '#/$defs/s' } }, required: ['n'], $defs: { s: { type: 'string' } } } }))
await t('additional', () => agent('addl', { schema: { type: 'object', additionalProperties: { type: 'integer' } } }))
await t('allOf', () => agent('allof', { schema: { type: 'object', properties: { n: { allOf: [{ type: 'integer' }] } }, required: ['n'] } }))
return out
