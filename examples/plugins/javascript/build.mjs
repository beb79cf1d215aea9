// Builds filter.wasm from filter.js with componentize-js (pinned in package-lock.json).
import { componentize } from '@bytecodealliance/componentize-js';
import { writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const { component } = await componentize({
  sourcePath: resolve(here, 'filter.js'),
  witPath: resolve(here, '../../../wit'),
  worldName: 'filter-plugin',
  disableFeatures: ['http', 'fetch-event'],
});
await writeFile(resolve(here, 'filter.wasm'), component);
console.log(`wrote filter.wasm (${component.length} bytes)`);
