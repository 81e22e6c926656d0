export const meta = { name: 'prompt-exotic-values', description: 'agent() prompts of exotic values' }
const out = []
for (const p of [Symbol('s'), 10n, () => 1, undefined, new String('boxed'), -0, NaN, '']) {
  try { out.push(await agent(p)) } catch (e) { out.push('threw: ' + e.name + ': ' + e.message) }
}
try { out.push(await agent()) } catch (e) { out.push('threw: ' + e.name + ': ' + e.message) }
return out
