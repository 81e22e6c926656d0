export const meta = { name: 'model-names-normalized', description: 'Model names: aliases are case-insensitive and trimmed; inherit and empty mean the main model' }
const KEY = 'model'
const VALS = ['haiku', 'Haiku', 'HAIKU', ' haiku', 'haiku ', 'haiku\n', 'haiku[1m]', 'Opus[1M]', 'sonnet', 'opus', 'best', 'Best', 'opusplan', 'OPUSPLAN', 'inherit', '', null, undefined, 'INHERIT', 'Inherit', 'inherit ', 'default', 'Default', 'gpt-5', 'GPT-5', 'fast', 'ha iku', 'x[1m]']
const out = []
for (const [i, v] of VALS.entries()) {
  try { out.push(await agent('probe ' + i, { label: 'L' + i, [KEY]: v })) }
  catch (e) { out.push('ERR ' + e.name) }
}
return out
