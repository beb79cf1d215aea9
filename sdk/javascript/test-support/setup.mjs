// Registers hooks.mjs; import it before anything that imports refract-plugin.js.
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
