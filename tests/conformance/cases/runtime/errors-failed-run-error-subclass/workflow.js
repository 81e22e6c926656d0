export const meta = { name: 'errors-failed-run-error-subclass', description: 'failed run: an Error subclass with its own name' }
class ValidationFailed extends Error { constructor(m) { super(m); this.name = 'ValidationFailed' } }
throw new ValidationFailed('bad input')
