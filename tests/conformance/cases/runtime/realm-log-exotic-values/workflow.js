export const meta = { name: 'realm-log-exotic-values', description: 'log() of exotic values' }
const circ = { a: 1 }; circ.self = circ
log(Symbol('s'))
log(10n)
log(() => 1)
log(function named() { return 2 })
log()
log(undefined)
log(new Error('e'))
log(circ)
log(new String('boxed'))
log(-0)
log(NaN)
log('first', 'second')
log([1, 2])
log(class K {})
return 'ok'
