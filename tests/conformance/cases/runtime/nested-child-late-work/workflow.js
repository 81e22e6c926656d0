export const meta = { name: 'nested-child-late-work', description: 'a child returns with a timer, a microtask and an agent call pending' }
const r = await workflow('c-late', {})
await new Promise((res) => setTimeout(res, 150))
log('parent end')
return r
