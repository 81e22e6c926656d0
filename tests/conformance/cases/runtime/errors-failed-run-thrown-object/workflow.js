export const meta = { name: 'errors-failed-run-thrown-object', description: 'A thrown object fails the run' }
throw { code: 1, msg: 'obj' }
