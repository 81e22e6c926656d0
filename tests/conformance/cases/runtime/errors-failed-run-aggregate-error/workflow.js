export const meta = { name: 'errors-failed-run-aggregate-error', description: 'failed run: AggregateError with a cause' }
throw new AggregateError([new Error('inner')], 'several things', { cause: new Error('root cause') })
