export const meta = { name: 'realm-unawaited-child-workflow', description: 'a child workflow left pending at return' }
workflow('kid', {})
return 'returned'
