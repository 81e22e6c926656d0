export const meta = { name: 'errors-finally-agent-after-throw', description: 'an agent call in finally after a throw' }
try {
  throw new Error('primary failure')
} finally {
  const c = await agent('cleanup', { label: 'cleanup' })
  log('cleanup said ' + c)
}
