export const meta = { name: 'nested-child-args-absent', description: 'what a child sees as args' }
return {
  none: await workflow('c-show'),
  undef: await workflow('c-show', undefined),
  nul: await workflow('c-show', null),
  num: await workflow('c-show', 0),
  str: await workflow('c-show', ''),
}
