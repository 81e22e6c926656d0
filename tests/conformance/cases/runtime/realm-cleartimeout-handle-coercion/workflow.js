export const meta = { name: 'realm-cleartimeout-handle-coercion', description: 'which handle values clearTimeout accepts' }
// Each timer is cleared with a value derived from its handle; the names of the timers that still fire are returned.
const fired = []
const tries = {
  string: (h) => String(h),
  leadingZero: (h) => '0' + h,
  padded: (h) => ' ' + h + ' ',
  decimalString: (h) => h + '.0',
  hexString: (h) => '0x' + h.toString(16),
  float: (h) => h + 0.0,
  toStringObject: (h) => ({ toString() { return String(h) } }),
  valueOfObject: (h) => ({ valueOf() { return h } }),
  array: (h) => [h],
  boxed: (h) => new Number(h),
  bigint: (h) => BigInt(h),
  symbol: () => Symbol('x'),
  nothing: () => undefined,
}
for (const [k, f] of Object.entries(tries)) { const h = setTimeout(() => fired.push(k), 5); clearTimeout(f(h)) }
await new Promise((r) => setTimeout(r, 100))
return { fired }
