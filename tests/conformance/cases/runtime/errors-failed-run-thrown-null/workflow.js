export const meta = { name: 'errors-failed-run-thrown-null', description: 'A thrown null fails the run' }
throw null
