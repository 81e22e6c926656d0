export const meta = { name: 'prompt-large', description: 'a 300,000-character prompt' }
const p = 'ab'.repeat(150000)
const r = await agent(p, { label: 'big' })
return { len: r.length, same: r === p }
