export const meta = { name: 'errors-stack-overflow-catchable', description: 'unbounded recursion is catchable; the run continues' }
function f(n) { return f(n + 1) + 1 }
let caught
try { f(0) } catch (e) { caught = { isRangeError: e instanceof RangeError, name: e.name } }
const a = await agent('after overflow')
return { caught, a }
