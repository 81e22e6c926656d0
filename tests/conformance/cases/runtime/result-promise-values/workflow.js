export const meta = { name: 'result-promise-values', description: 'returning a promise and a thenable' }
const inner = { p: Promise.resolve(1), t: { then(r) { r(2) } } }
return Promise.resolve({ a: 1, inner, agentP: agent('x') })
