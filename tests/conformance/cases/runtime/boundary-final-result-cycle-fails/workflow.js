export const meta = { name: 'boundary-final-result-cycle-fails', description: 'Final value cycle fails the run' }
const o = { a: 1 }
o.self = o
return o
