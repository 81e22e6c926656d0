export const meta = { name: 'boundary-final-result-symbol-fails', description: 'Final value symbol fails the run' }
return Symbol('s')
