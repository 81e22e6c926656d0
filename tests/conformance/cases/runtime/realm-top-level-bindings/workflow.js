export const meta = { name: 'realm-top-level-bindings', description: 'top-level var/function/let and globalThis' }
var v = 1
function f() { return 2 }
let l = 3
globalThis.g = 4
const own = Object.getOwnPropertyNames(globalThis)
return { v: typeof globalThis.v, f: typeof globalThis.f, l: typeof globalThis.l, g: typeof g, gDesc: Object.keys(Object.getOwnPropertyDescriptor(globalThis, 'g')).sort(),
  deleteAgent: delete globalThis.agent, agentAfterDelete: typeof agent,
  race: typeof race, sleep: typeof sleep, Iterator: typeof Iterator, console: typeof console, navigator: typeof navigator, self: typeof self, window: typeof window, global: typeof global, Bun: typeof Bun, Deno: typeof Deno,
  gc: typeof gc, print: typeof print, alert: typeof alert, escape: typeof escape, FinalizationRegistry: typeof FinalizationRegistry, Atomics: typeof Atomics, WeakRef: typeof WeakRef }
