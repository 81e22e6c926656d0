export const meta = { name: 'errors-failed-run-names-line-column', description: 'A failed run\'s message carries the throw\'s line and column in the workflow file' }
const x = 1
  throw new Error('top boom')
