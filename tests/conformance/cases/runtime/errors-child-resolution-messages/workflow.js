export const meta = { name: 'errors-child-resolution-messages', description: 'How workflow() words a child it cannot resolve, and the order of the names it lists' }
// Claude's list also names its bundled workflows and this file: only the case's own children (c-*) are kept.
// The parser's own words are masked: Claude's parser and V8 word some errors differently.
function shown(m) {
  return m
    .replace(/Available: (.*)$/, (_, l) => 'Available: ' + l.split(', ').filter((n) => n.startsWith('c-')).join(', '))
    .replace(/Script parse error: [^\n]*? \((\d+:\d+)\)/, 'Script parse error: <parser message> ($1)')
}
async function msg(f) { try { await f(); return 'resolved' } catch (e) { return [e.name, shown(e.message)] } }
return {
  missing: await msg(() => workflow('c-missing', {})),
  caseDiffers: await msg(() => workflow('C-alpha', {})),
  quoted: await msg(() => workflow("it's", {})),
  empty: await msg(() => workflow('', {})),
  noMeta: await msg(() => workflow('c-nometa', {})),
  badMeta: await msg(() => workflow('c-badmeta', {})),
  syntax: await msg(() => workflow('c-syntax', {})),
  syntaxIndented: await msg(() => workflow('c-tab', {})),
  syntaxAtEnd: await msg(() => workflow('c-eof', {})),
  personalSyntax: await msg(() => workflow('c-personal', {})),
  valid: await workflow('c-alpha', {}),
}
