export const meta = { name: 'errors-slot-logs-at-join', description: 'A failed slot is logged at the join, after logs from slots still running' }
const r = await parallel([
  () => { throw 'early failure' },
  async () => { await agent('slow', { label: 'slow' }); log('slot 1 finished its agent'); return 'ok' },
])
log('after join')
return r
