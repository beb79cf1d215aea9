// Module resolution hooks for the native tests (`node --test sdk/javascript/test/`): outside a
// component, `refract:plugin/host@0.1.0` resolves to a stand-in that records log lines, and the
// specifier `refract-plugin` to the library, as build.mjs's alias does.
const HOST = new URL('./host.mjs', import.meta.url).href;
const LIBRARY = new URL('../refract-plugin.js', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (specifier.startsWith('refract:plugin/host')) return { url: HOST, shortCircuit: true };
  if (specifier === 'refract-plugin') return { url: LIBRARY, shortCircuit: true };
  return next(specifier, context);
}
