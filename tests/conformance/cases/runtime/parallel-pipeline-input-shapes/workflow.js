export const meta = { name: 'parallel-pipeline-input-shapes', description: 'parallel()/pipeline() of iterables, array-likes and holes' }
async function t(f) { try { return await f() } catch (e) { return 'threw: ' + e.name + ': ' + e.message } }
return {
  set: await t(() => parallel(new Set([() => 1]))),
  arrayLike: await t(() => parallel({ length: 1, 0: () => 1 })),
  none: await t(() => parallel()),
  nul: await t(() => parallel(null)),
  hole: await t(() => parallel([, () => 2])),
  undefinedEntry: await t(() => parallel([undefined])),
  subclass: await t(() => parallel(new (class A extends Array {})(() => 3))),
  pipelineSet: await t(() => pipeline(new Set([1]), (x) => x)),
  pipelinePromiseItem: await t(() => pipeline([Promise.resolve(5)], (x) => typeof x)),
  pipelineAsyncNull: await t(() => pipeline([1], async () => null, () => 'ran')),
  pipelineNoStagesHole: await t(() => pipeline([, 1])),
  pipelineNullItems: await t(() => pipeline(null, (x) => x)),
  pipelineStageUndefined: await t(() => pipeline([1], undefined)),
  extraArg: await t(() => parallel([() => 1], { concurrency: 1 })),
}
