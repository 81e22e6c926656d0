export const meta = { name: 'agents-definition-file-names', description: 'which file names under .claude/agents load' }
const out = {}
for (const t of ["ext-upper-md", "ext-markdown", "ext-bak", "dotfile-agent", "dot-folder-agent", "two-levels-down", "no-extension", "folder-named-like-a-file"]) { try { await agent('try ' + t, { agentType: t }); out[t] = 'loaded' } catch (e) { out[t] = 'not found' } }
return out
