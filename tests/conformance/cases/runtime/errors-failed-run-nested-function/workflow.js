export const meta = { name: 'errors-failed-run-nested-function', description: 'The line and column of a throw inside a function after an await' }
function f() {
  return g()
}
function g() { throw new RangeError('deep') }
await agent('a')
f()
