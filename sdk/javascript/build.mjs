// Builds a refract plugin component from a JavaScript module:
//
//   node sdk/javascript/build.mjs --world <policy-plugin|filter-plugin|transform-plugin> \
//     --source <file.js> --out <file.wasm>
//
// 1. esbuild bundles the module and everything it imports into one ES module; the specifier
//    `refract-plugin` resolves to sdk/javascript/refract-plugin.js (whose TOML parser, smol-toml,
//    comes from sdk/javascript/node_modules), and the WIT imports `refract:plugin/*` and `wasi:*`
//    stay imports.
// 2. componentize-js turns the bundle into a component of the world in <repo>/wit, with the
//    `http` and `fetch-event` features disabled.
//
// Needs `npm ci` in sdk/javascript once (.ci/install-guest-toolchains runs it); works offline then.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const WORLDS = ['policy-plugin', 'filter-plugin', 'transform-plugin'];

function usage(message) {
  const worlds = WORLDS.join('|');
  console.error(`${message}\nusage: node ${process.argv[1]} --world <${worlds}> --source <file.js> --out <file.wasm>`);
  process.exit(2);
}

let args;
try {
  args = parseArgs({
    options: {
      world: { type: 'string' },
      source: { type: 'string' },
      out: { type: 'string' },
      wit: { type: 'string', default: resolve(here, '../../wit') },
    },
  }).values;
} catch (err) {
  usage(err.message);
}
if (!WORLDS.includes(args.world)) usage(`--world must be one of: ${WORLDS.join(', ')}`);
if (!args.source || !args.out) usage('--source and --out are required');

let esbuild, componentize;
try {
  esbuild = await import('esbuild');
  ({ componentize } = await import('@bytecodealliance/componentize-js'));
} catch (err) {
  console.error(`${err.message}\nrun 'npm ci' in ${here} first (.ci/install-guest-toolchains does)`);
  process.exit(1);
}

const started = Date.now();
const work = await mkdtemp(join(tmpdir(), 'refract-js-build-'));
try {
  // named after the source, as stack traces show it
  const bundle = join(work, basename(args.source).replace(/\.[cm]?[jt]s$/, '') + '.js');
  await esbuild.build({
    entryPoints: [resolve(args.source)],
    outfile: bundle,
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    keepNames: true, // `info` names a plugin after its class when it has no NAME
    alias: { 'refract-plugin': resolve(here, 'refract-plugin.js') },
    nodePaths: [resolve(here, 'node_modules')],
    external: ['refract:plugin/*', 'wasi:*'],
    logLevel: 'warning',
  });
  const { component } = await componentize({
    sourcePath: bundle,
    witPath: resolve(args.wit),
    worldName: args.world,
    disableFeatures: ['http', 'fetch-event'],
  });
  await writeFile(args.out, component);
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  console.log(`wrote ${args.out} (${component.length} bytes) in ${seconds} s`);
} finally {
  await rm(work, { recursive: true, force: true });
}
