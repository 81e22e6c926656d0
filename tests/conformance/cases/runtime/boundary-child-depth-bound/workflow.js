export const meta = { name: 'boundary-child-depth-bound', description: 'Child args and results may nest 100,000 objects' }
function deep(n) { let v = 'leaf'; for (let i = 0; i < n; i++) v = { a: v }; return v }
async function t(f) { try { return await f() } catch (e) { return e.message } }
const out = {}
out.args99999 = await t(() => workflow('child-depth', { v: deep(99999) }))
out.args100000 = await t(() => workflow('child-depth', { v: deep(100000) }))
out.result100000 = await t(async () => { let d = 0; for (let x = await workflow('child-depth', { make: 100000 }); x && typeof x === 'object'; x = x.a) d++; return d })
out.result100001 = await t(async () => { await workflow('child-depth', { make: 100001 }); return 'crossed' })
return out
