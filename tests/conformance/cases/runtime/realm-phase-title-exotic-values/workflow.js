export const meta = { name: 'realm-phase-title-exotic-values', description: 'phase() of exotic values' }
const r = []
phase(Symbol('s')); r.push(await agent('p0'))
phase(10n); r.push(await agent('p1'))
phase(() => 1); r.push(await agent('p2'))
phase(); r.push(await agent('p3'))
phase(undefined); r.push(await agent('p4'))
phase('  padded  '); r.push(await agent('p5'))
phase('a\nb'); r.push(await agent('p6'))
phase(-0); r.push(await agent('p7'))
return r
