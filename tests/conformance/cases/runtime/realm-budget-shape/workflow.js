export const meta = { name: 'realm-budget-shape', description: 'budget is a frozen null-prototype object whose total is a data property' }
const desc = {}
for (const k of Reflect.ownKeys(budget)) { const d = Object.getOwnPropertyDescriptor(budget, k); desc[String(k)] = { kind: 'value' in d ? typeof d.value : 'accessor', writable: d.writable === undefined ? 'n/a' : d.writable, enumerable: d.enumerable, configurable: d.configurable } }
const threw = f => { try { f(); return false } catch (e) { return e instanceof TypeError } }
return { own: Reflect.ownKeys(budget).map(String), desc, frozen: Object.isFrozen(budget), protoNull: Object.getPrototypeOf(budget) === null, json: JSON.stringify(budget),
  assignThrows: threw(() => { budget.total = 5 }), addThrows: threw(() => { budget.extra = 1 }), deleteThrows: threw(() => { delete budget.spent }), detachedSpent: (0, budget.spent)(), spentArity: budget.spent.length }
