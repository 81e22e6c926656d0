export const meta = {
  name: 'watch-me',
  description: 'Agents with delays, one failing, for the run viewer tests',
  phases: [{ title: 'Build' }, { title: 'Check' }],
}
phase('Build')
const built = await parallel([1, 2, 3].map((i) => () => agent(`build part ${i}`, { label: `build:${i}` })))
log(`built ${built.filter((b) => b !== null).length} of 3`)
phase('Check')
const checks = await parallel([1, 2].map((i) => () => agent(`check part ${i}`, { label: `check:${i}` })))
const last = await agent('the last step', { label: 'last' })
return { built, checks, last }
