export const meta = { name: 'agents-frontmatter-loading', description: 'Which agent files load: frontmatter rules and what malformed files do' }
async function tryType(t, label) {
  try { return await agent('probe ' + label, { label, agentType: t }) }
  catch (e) { const m = /agent type '([\s\S]*)' not found/.exec(e.message); return m ? 'not found: ' + m[1] : 'ERR ' + e.name + ': ' + e.message }
}
const out = {}
for (const [i, t] of ['bad-yaml', 'bad-yaml2', 'colon-desc', 'y-tab', 'y-quote', 'y-indent', 'y-dupkey', 'y-dupkey2', 'y-anchor', 'no-name', 'no-desc', 'null-desc', 'ws-desc', 'desc-num', 'no-fm', '123', 'num-name', 'true', 'bool-name', 'list-name', 'empty-name', '  ws-name  ', 'ws-name', 'ext-markdown', 'ext-txt', 'crlf', 'bom', 'leading-blank', 'unterminated', 'empty-body', 'dash-in-body', 'extra-key', 'tools-num', 'tools-brace'].entries()) out[i + ':' + String(t)] = await tryType(t, 'L' + i)
return out
