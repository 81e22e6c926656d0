export const meta = { name: 'args-number', description: 'a number as args' }
return { type: typeof args, value: args }
