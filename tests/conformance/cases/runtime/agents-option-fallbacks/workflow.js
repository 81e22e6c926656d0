export const meta = { name: 'agents-option-fallbacks', description: 'when an agent definition model and effort apply, and definitions named like built-ins' }
const out = {}
async function t(k, f) { try { out[k] = await f() } catch (e) { out[k] = 'ERR ' + e.name + ': ' + String(e.message).slice(0, 200) } }
await t('effortInvalidOverDef', () => agent('a', { label: 'm-1', agentType: 'cfg', effort: 'ultra' }))
await t('effortNumericOverDef', () => agent('a', { label: 'm-2', agentType: 'cfg', effort: 5 }))
await t('modelNullOverDef', () => agent('a', { label: 'm-3', agentType: 'cfg', model: null }))
await t('modelEmptyOverDef', () => agent('a', { label: 'm-4', agentType: 'cfg', model: '' }))
await t('exploreOverride', () => agent('a', { label: 'ex', agentType: 'Explore' }))
await t('personalColon', () => agent('a', { label: 'pc', agentType: 'p:colon' }))
return out
