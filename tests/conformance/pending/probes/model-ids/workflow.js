export const meta = { name: 'model-ids', description: 'Shows the model id each model option reaches' }
const VALS = ["claude-opus-4-1-20250805", "claude-opus-4-20250514", "claude-opus-4-1", "claude-opus-4", "claude-opus-4-5", "claude-opus-4-6", "claude-3-opus-20240229", "claude-opus-5-5", "CLAUDE-OPUS-5-5", "claude-opus-5-5[1m]", "claude-sonnet-4-5", "CLAUDE-SONNET-4-5", "claude-sonnet-4", "claude-sonnet-4-20250514", "claude-sonnet-5-5", "sonnet-5-5", "claude-haiku-4-5", "claude-3-5-haiku-20241022", "Claude-Haiku-5-5", "sonnet[2m]", "opus-4", "my-opus"]
const out = []
for (const [i, v] of VALS.entries()) out.push(await agent('probe ' + i, { label: v, model: v }))
return out
