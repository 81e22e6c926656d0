export const meta = { name: 'boundary-copy-unreadable-values', description: 'What the boundary copy does with values it cannot read' }
const revoked = () => { const r = Proxy.revocable({}, {}); r.revoke(); return r.proxy }
const noKeys = () => new Proxy({ label: 'L', v: 1 }, { ownKeys() { throw new Error('trap') } })
async function t(f) { try { return await f() } catch (e) { return { threw: e.name, hostShaped: Object.getPrototypeOf(e) === null, message: e.message.includes('4096') ? e.message : undefined } } }
const out = {}
out.optionsNoKeys = await t(() => agent('x', noKeys()))
out.optionsRevokedValue = await t(() => agent('x', { label: 'R', p: revoked() }))
out.optionsRevokedRoot = await t(() => agent('x', revoked()))
out.childNoKeys = await t(() => workflow('kid', { p: noKeys(), ok: 1 }))
out.childNoKeysRoot = await t(() => workflow('kid', noKeys()))
out.childRevokedValue = await t(() => workflow('kid', { p: revoked(), ok: 1 }))
out.childRevokedElement = await t(() => workflow('kid', { l: [1, revoked(), 3] }))
out.childRevokedRoot = await t(() => workflow('kid', revoked()))
out.childGetThrows = await t(() => workflow('kid', { g: new Proxy({ a: 1, b: 2 }, { get(t, k) { if (k === 'a') throw new Error('get a'); return t[k] } }) }))
out.childLengthThrows = await t(() => workflow('kid', { l: new Proxy([1, 2], { get(t, k) { if (k === 'length') throw new Error('len'); return t[k] } }), ok: 1 }))
out.childIndexThrows = await t(() => workflow('kid', { l: new Proxy([1, 2], { get(t, k) { if (k === '0') throw new Error('idx'); return t[k] } }) }))
out.childGetterReturnsRevoked = await t(() => workflow('kid', { a: 1, get b() { return revoked() } }))
out.childGetterReturnsBigArray = await t(() => workflow('kid', { a: 1, get b() { return new Array(5000) } }))
out.parallelRevoked = await t(() => parallel(revoked()))
out.pipelineRevoked = await t(() => pipeline(revoked(), (x) => x))
out.final = { noKeys: noKeys(), revoked: revoked(), inArray: [revoked()] }
return out
