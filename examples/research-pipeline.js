export const meta = {
  name: 'research-pipeline',
  description: 'Search, read and vote on sources for each question, item by item with no stage barrier',
  whenToUse: 'Answering several research questions with deduplicated sources and a three-vote quorum',
  phases: [{ title: 'Search' }, { title: 'Read' }, { title: 'Vote' }],
}

const questions = (args && args.questions) || ['How do WAL checkpoints work in SQLite?', 'What bounds V8 heap growth?']
const fetchCap = (args && args.fetchCap) || 6
const seen = new Set()
let fetches = 0

const sourcesSchema = {
  type: 'object',
  properties: { urls: { type: 'array', items: { type: 'string' }, maxItems: 4 } },
  required: ['urls'],
}
const voteSchema = { type: 'object', properties: { keep: { type: 'boolean' } }, required: ['keep'] }

const answers = await pipeline(
  questions,
  async (q) => {
    const found = await agent(`Find up to four authoritative sources for: ${q}`, { label: `search:${q.slice(0, 40)}`, phase: 'Search', schema: sourcesSchema })
    return found && found.urls.length ? found.urls : null
  },
  async (urls, q) => {
    const fresh = urls.filter((u) => !seen.has(u) && seen.add(u))
    const admitted = fresh.filter(() => fetches++ < fetchCap)
    const notes = await parallel(admitted.map((u) => () => agent(`Read ${u} and note what answers: ${q}`, { label: `read:${u}`, phase: 'Read' })))
    const ok = notes.filter((n) => n !== null)
    return ok.length ? ok : null
  },
  async (notes, q) => {
    const draft = await agent(`Answer "${q}" from these notes:\n${notes.join('\n---\n')}`, { label: `draft:${q.slice(0, 40)}`, phase: 'Vote' })
    const votes = await parallel([0, 1, 2].map((i) => () =>
      agent(`Reviewer ${i + 1}: is this a sound answer to "${q}"?\n${draft}`, { label: `vote:${i}`, phase: 'Vote', schema: voteSchema })))
    const yes = votes.filter((v) => v?.keep).length
    return { question: q, answer: draft, quorum: yes >= 2, votes: yes }
  },
)

return answers.map((a, i) => a ?? { question: questions[i], unanswered: true })
