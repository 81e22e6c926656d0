export const meta = { name: 'realm-phase-list-meta-and-options', description: 'The run phase list: meta phases first, then new titles from phase() and agent phase options', phases: [{ title: 'Scan', detail: 'look around' }, { title: 'Fix', model: 'haiku' }, { title: 'Unused' }] }
const r = []
r.push(await agent('before any phase', { label: 'a0' }))
phase('Scan')
r.push(await agent('in scan', { label: 'a1' }))
r.push(await agent('explicit adhoc', { label: 'a2', phase: 'Adhoc' }))
phase('New')
r.push(await agent('in new', { label: 'a3' }))
r.push(await agent('explicit fix', { label: 'a4', phase: 'Fix' }))
phase('Scan')
r.push(await agent('scan again', { label: 'a5' }))
phase('Fix')
r.push(await agent('in fix', { label: 'a6' }))
phase('Empty phase never used')
phase('Last')
return r
