export const meta = { name: 'boundary-agent-options-copied', description: 'agent() options are copied before they are read' }
async function attempt(opts) { try { return await agent('probe ' + JSON.stringify(Object.keys(opts)), opts) } catch (e) { return { threw: e.name, namesObjectObject: String(e.message).includes('[object Object]') } } }
return {
  labelWithToString: await attempt({ label: { toString() { return 'custom' } } }),
  labelDate: await attempt({ label: new Date(0) }),
  labelBoxedString: await attempt({ label: new String('boxed') }),
  labelFunction: await attempt({ label: function f() {} }),
  labelSymbol: await attempt({ label: Symbol('s') }),
  labelGetter: await attempt({ get label() { return 'from getter' } }),
  agentTypeBoxedString: await attempt({ agentType: new String('general-purpose') }),
  modelBoxedString: await attempt({ model: new String('haiku') }),
}
