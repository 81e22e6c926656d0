export const meta = { name: 'realm-phase-list-300-titles', description: '300 phase titles' }
for (let i = 0; i < 300; i++) phase('P' + i)
return 'ok'
