export const meta = { name: 'boundary-final-result-array-4097-fails', description: 'Final value array-4097 fails the run' }
return new Array(4097).fill(0)
