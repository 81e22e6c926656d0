export const meta = { name: 'label-fallback-surrogate-pairs', description: 'The 60-unit fallback cut drops a half surrogate pair' }
const P = ['a'.repeat(59) + '😀' + 'tail', 'a'.repeat(58) + '😀' + 'tail', 'a'.repeat(60) + '😀', '😀'.repeat(40), '  ' + 'b'.repeat(57) + '😀zz', 'é'.repeat(70), 'e\u0301'.repeat(40), 'a'.repeat(30) + '\u2028' + 'b'.repeat(40), 'a'.repeat(30) + '\u00a0\u00a0' + 'b'.repeat(40), '', '   ']
const out = []
for (const p of P) out.push(await agent(p))
return out
