export const meta = { name: 'boundary-final-result-4096-ok', description: 'Arrays of exactly 4,096 elements cross' }
return { a: new Array(4096).fill(0).map((_, i) => i % 3), b: [new Array(3000).fill(1), new Array(3000).fill(2)].map(x => x.length) }
