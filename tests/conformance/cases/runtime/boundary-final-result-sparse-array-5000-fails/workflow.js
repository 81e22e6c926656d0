export const meta = { name: 'boundary-final-result-sparse-array-5000-fails', description: 'Final value sparse-array-5000 fails the run' }
const a = []
a[4999] = 1
return a
