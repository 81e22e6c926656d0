export const meta = { name: 'boundary-final-result-depth-28001-fails', description: 'Final value depth-28001 fails the run' }
let v = 'leaf'
for (let i = 0; i < 28001; i++) v = { a: v }
return v
