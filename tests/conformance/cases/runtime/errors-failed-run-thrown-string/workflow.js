export const meta = { name: 'errors-failed-run-thrown-string', description: 'A thrown string fails the run' }
throw 'top string'
