export const meta = { name: 'boundary-final-result-nested-array-4097-fails', description: 'Final value nested-array-4097 fails the run' }
return { ok: [1, 2], big: [new Array(4097).fill(0)] }
