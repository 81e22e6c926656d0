export const meta = { name: 'realm-globals-shape', description: 'property shape of the injected globals and console' }
const names = ['agent', 'parallel', 'pipeline', 'workflow', 'phase', 'log', 'args', 'budget', 'console', 'setTimeout', 'clearTimeout']
const globals = Object.fromEntries(names.map((k) => { const d = Object.getOwnPropertyDescriptor(globalThis, k); return [k, d ? { writable: d.writable, enumerable: d.enumerable, configurable: d.configurable, accessor: 'get' in d } : 'absent'] }))
const functions = Object.fromEntries(names.filter((k) => typeof globalThis[k] === 'function').map((k) => [k, { name: globalThis[k].name, length: globalThis[k].length, protoIsFunctionPrototype: Object.getPrototypeOf(globalThis[k]) === Function.prototype }]))
const consoleShape = { keys: Reflect.ownKeys(console).map(String).sort(), frozen: Object.isFrozen(console), protoIsNull: Object.getPrototypeOf(console) === null,
  methodsAreFunctions: ['log', 'info', 'warn', 'error', 'debug'].every((m) => typeof console[m] === 'function'), missing: ['trace', 'dir', 'table', 'group', 'time', 'assert', 'count'].filter((m) => console[m] === undefined) }
const enumerableGlobals = Object.keys(globalThis).filter((k) => names.includes(k)).sort()
return { globals, functions, consoleShape, enumerableGlobals, returns: { log: String(log('x')), phase: String(phase('P1')) } }
