export const meta = { name: 'errors-failed-run-rejected-return', description: 'returning a rejected promise' }
return Promise.reject(new TypeError('rejected at return'))
