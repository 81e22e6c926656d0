export const meta = { name: 'boundary-final-result-bigint-fails', description: 'Final value bigint fails the run' }
return { b: 10n }
