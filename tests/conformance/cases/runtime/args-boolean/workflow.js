export const meta = { name: 'args-boolean', description: 'a boolean as args' }
return { type: typeof args, value: args }
