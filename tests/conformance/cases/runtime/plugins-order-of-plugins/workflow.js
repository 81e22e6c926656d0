export const meta = { name: 'main', description: 'plugin case' }
const out = {}
for (const n of ["wfp:shared"]) {
  try { out['wf ' + n] = await workflow(n) } catch (e) { out['wf ' + n] = /no workflow|not found/i.test(e.message) ? 'missing' : 'failed' }
}
for (const t of ["wfp:helper"]) {
  try { out['agent ' + t] = await agent('hi ' + t, { agentType: t, label: t }) } catch (e) { out['agent ' + t] = e.message }
}
return out
