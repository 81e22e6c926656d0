export const meta = { name: 'boundary-options-and-fanout-array-bound', description: 'the 4,096 bound on agent options and fan-out arrays' }
const big = (n) => new Array(n).fill(0)
async function attempt(f) { try { const r = await f(); return 'passed' + (Array.isArray(r) ? ' ' + r.length : '') } catch (e) { return { name: e.name, names4097: String(e.message).includes('4097'), names4096: String(e.message).includes('4096') } } }
return {
  unknownOption4097: await attempt(() => agent('option 4097', { label: 'big option', extra: big(4097) })),
  nestedOption4097: await attempt(() => agent('nested option 4097', { extra: { deep: [big(4097)] } })),
  schemaEnum4097: await attempt(() => agent('schema 4097', { schema: { type: 'object', properties: { x: { enum: big(4097).map((_, i) => i) } } } })),
  unknownOption4096: await attempt(() => agent('option 4096', { extra: big(4096) })),
  parallel4097: await attempt(() => parallel(big(4097).map(() => () => 1))),
  pipeline4097: await attempt(() => pipeline(big(4097), (x) => x)),
  pipelineNoStages4097: await attempt(() => pipeline(big(4097))),
}
