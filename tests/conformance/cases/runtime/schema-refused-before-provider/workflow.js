export const meta = { name: 'schema-refused-before-provider', description: 'Which schemas are refused before the provider is called' }
const SCHEMAS = {
  empty: {},
  rootString: { type: 'string' },
  rootArray: { type: 'array', items: { type: 'string' } },
  rootInteger: { type: 'integer' },
  rootNull: { type: 'null' },
  rootBoolean: { type: 'boolean' },
  noType: { properties: { a: { type: 'string' } } },
  typeList: { type: ['object', 'null'], properties: { a: { type: 'string' } } },
  rootAnyOf: { anyOf: [{ type: 'object' }, { type: 'string' }] },
  rootOneOf: { oneOf: [{ type: 'object', properties: { a: { const: 'x' } } }] },
  rootEnum: { enum: [{ a: 'x' }] },
  rootRef: { $ref: '#/$defs/root', $defs: { root: { type: 'object' } } },
  draft2020: { type: 'object', $schema: 'https://json-schema.org/draft/2020-12/schema', properties: { a: { type: 'string' } } },
  unknownKeyword: { type: 'object', foo: 1 },
  badPropertyType: { type: 'object', properties: { a: { type: 'bogus' } } },
  badRequired: { type: 'object', required: 'a' },
  badProperties: { type: 'object', properties: 5 },
  upperCaseType: { type: 'OBJECT' },
  missingRef: { type: 'object', properties: { a: { $ref: '#/definitions/missing' } } },
  badPattern: { type: 'object', properties: { a: { type: 'string', pattern: '(' } } },
  arraySchema: [],
  numberSchema: 5,
  stringSchema: 'object',
  trueSchema: true,
  objectOnly: { type: 'object' },
  draft07: { type: 'object', $schema: 'http://json-schema.org/draft-07/schema#', properties: { a: { type: 'string' } } },
  emailFormat: { type: 'object', properties: { a: { type: 'string', format: 'email' } } },
  unknownFormat: { type: 'object', properties: { a: { type: 'string', format: 'no-such-format' } } },
  localRef: { type: 'object', properties: { a: { $ref: '#/$defs/x' } }, $defs: { x: { type: 'string' } } },
  nullable: { type: 'object', nullable: true },
  closed: { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false },
  falseSchema: false,
  nullSchema: null,
}
const out = {}
for (const [k, s] of Object.entries(SCHEMAS)) {
  try { const r = await agent('schema ' + k, { label: k, schema: s }); out[k] = typeof r === 'string' ? 'text ' + r : 'ok' }
  catch (e) { out[k] = 'refused ' + e.name }
}
return out
