export const meta = { name: 'errors-failed-run-thrown-number', description: 'A thrown number fails the run' }
throw 42
