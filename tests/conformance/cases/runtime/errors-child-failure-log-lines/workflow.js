export const meta = { name: 'errors-child-failure-log-lines', description: 'The parent\'s log line for a failing child' }
for (const k of ['string', 'number', 'object', 'null']) { try { await workflow('child-throw', { k }) } catch (e) {} }
return 'ok'
