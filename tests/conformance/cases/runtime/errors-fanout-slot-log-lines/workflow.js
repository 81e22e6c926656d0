export const meta = { name: 'errors-fanout-slot-log-lines', description: 'Failed parallel()/pipeline() slots log one line each, in slot order, at the join' }
const r = await parallel([
  () => { throw 'str' },
  () => { throw { a: 1 } },
  () => { throw new Error('e msg') },
  () => { throw 42 },
  () => { throw null },
  () => Promise.reject(undefined),
  () => { throw new TypeError('t msg') },
  () => { throw [1, 2] },
  () => { const e = new Error('named'); e.name = 'Custom'; throw e },
  () => { throw new Error('') },
  () => { throw { message: 'has message' } },
  () => 'ok',
])
log('between')
const p = await pipeline([1, 2, 3, 4],
  async (x, item, i) => { if (i === 1) throw 'stage1 str ' + i; if (i === 3) throw new Error('stage1 err ' + i); return x },
  async (x, item, i) => { if (i === 2) throw { s: 2 }; if (i === 0) throw new Error('stage2 err 0'); return x })
return { r, p }
