export const meta = { name: 'agent-reply-text-verbatim', description: 'reply text whitespace and empty' }
const a = await agent('pad', { label: 'pad' })
const b = await agent('empty', { label: 'empty' })
const c = await agent('nl', { label: 'nl' })
return { a: JSON.stringify(a), b: JSON.stringify(b), c: JSON.stringify(c) }
