export const meta = { name: 'main', description: 'plugin case' }
return 'the local main workflow ran instead'
