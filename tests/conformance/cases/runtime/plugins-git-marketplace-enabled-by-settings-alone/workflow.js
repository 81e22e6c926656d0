export const meta = { name: 'main', description: 'plugin case' }
const out = {}
for (const n of ["wfp:hello"]) {
  try { out['wf ' + n] = await workflow(n) } catch (e) { out['wf ' + n] = /no workflow|not found/i.test(e.message) ? 'missing' : 'failed' }
}
return out
