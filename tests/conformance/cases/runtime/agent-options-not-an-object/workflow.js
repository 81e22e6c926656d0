export const meta = { name: 'agent-options-not-an-object', description: 'agent() options that are not plain objects' }
const out = {}
for (const [k, o] of [['str', 'label-ish'], ['num', 42], ['nul', null], ['arr', ['a']], ['bool', true], ['fn', () => 1], ['sym', Symbol('x')], ['boxed', new String('s')], ['labelledArray', Object.assign(['a'], { label: 'array label' })]]) {
  try { out[k] = await agent('p-' + k, o) } catch (e) { out[k] = 'threw: ' + e.name + ': ' + e.message }
}
try { await agent('p-big', new Array(4097).fill(0)); out.array4097 = 'ran' } catch (e) { out.array4097 = 'threw: ' + e.name + ': ' + e.message }
return out
