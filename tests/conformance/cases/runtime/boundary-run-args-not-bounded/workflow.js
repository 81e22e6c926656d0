export const meta = { name: 'boundary-run-args-not-bounded', description: 'The run\'s own args are not bounded' }
return { n: args.items.length, inner: args.o.a.length }
