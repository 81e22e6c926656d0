export const meta = { name: 'budget-spent-across-call-kinds', description: 'budget.spent() across kinds of calls' }
const s = []
s.push(budget.spent())
await agent('text call', { label: 'text' })
s.push(budget.spent())
await agent('schema call', { label: 'schema', schema: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] } })
s.push(budget.spent())
const failed = await agent('fails', { label: 'fails' })
s.push(budget.spent())
await parallel([() => agent('p1', { label: 'p1' }), () => agent('p2', { label: 'p2' })])
s.push(budget.spent())
return { s, failed, total: budget.total, remaining: budget.remaining(), remainingType: typeof budget.remaining() }
