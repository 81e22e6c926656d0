export const meta = { name: 'schema-coercion-enum-const', description: 'top-level coercion next to enum and const' }
async function attempt(k, schema) { try { return await agent('VALIDATE ' + k, { schema }) } catch (e) { return 'rejected after re-asks' } }
const out = {}
out["typed enum"] = await attempt("typed enum", {"type": "object", "properties": {"n": {"type": "integer", "enum": [1, 2]}}, "required": ["n"]})
out["untyped enum"] = await attempt("untyped enum", {"type": "object", "properties": {"n": {"enum": [1, 2]}}, "required": ["n"]})
out["typed const"] = await attempt("typed const", {"type": "object", "properties": {"n": {"type": "integer", "const": 5}}, "required": ["n"]})
out["boolean const"] = await attempt("boolean const", {"type": "object", "properties": {"n": {"type": "boolean", "const": true}}, "required": ["n"]})
out["integer or string"] = await attempt("integer or string", {"type": "object", "properties": {"n": {"type": ["integer", "string"]}}, "required": ["n"]})
out["number with minimum"] = await attempt("number with minimum", {"type": "object", "properties": {"n": {"type": "number", "minimum": 10}}, "required": ["n"]})
out["typed enum miss"] = await attempt("typed enum miss", {"type": "object", "properties": {"n": {"type": "integer", "enum": [1, 2]}}, "required": ["n"]})
return out
