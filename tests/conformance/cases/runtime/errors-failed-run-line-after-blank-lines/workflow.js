export const meta = { name: 'errors-failed-run-line-after-blank-lines', description: 'positions after blank lines' }


throw new Error('file line 4, new at column 7')
