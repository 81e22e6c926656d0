export const meta = { name: 'errors-failed-run-empty-message', description: 'failed run: an Error with no message' }
throw new RangeError()
