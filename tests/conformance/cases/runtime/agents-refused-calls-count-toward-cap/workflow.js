export const meta = { name: 'agents-refused-calls-count-toward-cap', description: 'Calls refused before the provider still count toward the 1,000-call cap' }
let refused = 0
for (let i = 0; i < 400; i++) { try { await agent('x' + i, { agentType: 'nope' }) } catch (e) { refused++ } }
for (let i = 0; i < 300; i++) { try { await agent('y' + i, { schema: { type: 'array' } }) } catch (e) { refused++ } }
for (let i = 0; i < 300; i++) { try { await agent('z' + i, { agentType: 't-lower' }) } catch (e) { refused++ } }
let after
try { await agent('after'); after = 'ran' } catch (e) { after = /call cap/.test(e.message) ? 'cap reached' : 'other: ' + e.message }
return { refused, after }
