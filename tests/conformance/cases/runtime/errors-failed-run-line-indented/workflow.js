export const meta = { name: 'errors-failed-run-line-indented', description: 'positions after indentation' }
    throw new Error('file line 2 col 11')
