// Example refract record filter in JavaScript.
//
// Drops every record that has a header named `header` (default "env") whose value is exactly the
// UTF-8 bytes of `equals` (default "test"); keeps all others, including records whose matching
// header is null.

import { log } from 'refract:plugin/host@0.1.0';

const NAME = 'example-filter-javascript';
const VERSION = '0.1.0';
const DEFAULTS = { header: 'env', equals: 'test' };

let headerName = DEFAULTS.header;
let dropValue = new TextEncoder().encode(DEFAULTS.equals);

function invalidConfig(message) {
  return { tag: 'invalid-config', val: message };
}

// Reads `key = "string"` pairs: the subset of TOML that a table of string settings serializes to
// (basic, literal and multi-line strings, comments). Anything else is reported against its key.
function parseConfig(text) {
  const settings = { ...DEFAULTS };
  const seen = new Set();
  let pos = 0;
  const skip = (re) => {
    re.lastIndex = pos;
    const m = re.exec(text);
    if (m) pos += m[0].length;
    return m;
  };
  const BLANK = /(?:[ \t\r\n]|#[^\n]*)*/y;
  const SPACE = /[ \t]*/y;
  const LINE_END = /[ \t]*(?:#[^\n]*)?(?:\r?\n|$)/y;
  const TABLE = /\[+[ \t]*([^\]\n]*?)[ \t]*\]/y;
  const BARE_KEY = /[A-Za-z0-9_.-]+/y;
  for (skip(BLANK); pos < text.length; skip(BLANK)) {
    const table = skip(TABLE);
    if (table) throw invalidConfig(`${table[1]}: unknown key (expected header or equals)`);
    let key = readString(text, pos, false);
    if (key) pos = key.end;
    key = key ? key.value : skip(BARE_KEY)?.[0];
    if (key === undefined) throw invalidConfig(`cannot read a key at: ${text.slice(pos).split('\n')[0]}`);
    skip(SPACE);
    if (text[pos] !== '=') throw invalidConfig(`${key}: expected \`=\``);
    pos++;
    skip(SPACE);
    if (!(key in DEFAULTS)) throw invalidConfig(`${key}: unknown key (expected header or equals)`);
    if (seen.has(key)) throw invalidConfig(`${key}: duplicate key`);
    seen.add(key);
    const value = readString(text, pos, true);
    if (!value) throw invalidConfig(`${key}: expected a string`);
    pos = value.end;
    if (!skip(LINE_END)) throw invalidConfig(`${key}: expected a string`);
    settings[key] = value.value;
  }
  if (settings.header === '') throw invalidConfig('header: must not be empty');
  return settings;
}

const ESCAPES = { b: '\b', t: '\t', n: '\n', f: '\f', r: '\r', '"': '"', '\\': '\\' };

// The string starting at text[start] ("...", '...', and with `multiLine` also """...""" and
// '''...'''): { value, end } with `end` just past the closing quote, or undefined.
function readString(text, start, multiLine) {
  const quote = text[start];
  if (quote !== '"' && quote !== "'") return undefined;
  const triple = quote.repeat(3);
  const multi = text.startsWith(triple, start);
  if (multi && !multiLine) return undefined;
  let i = start + (multi ? 3 : 1);
  if (multi && text[i] === '\n') i++;
  else if (multi && text.startsWith('\r\n', i)) i += 2;
  let out = '';
  while (i < text.length) {
    const ch = text[i];
    if (multi && text.startsWith(triple, i)) {
      let run = 3;
      while (run < 5 && text[i + run] === quote) run++;
      return { value: out + quote.repeat(run - 3), end: i + run };
    }
    if (!multi && ch === quote) return { value: out, end: i + 1 };
    if (ch === '\n' && !multi) return undefined;
    if (ch !== '\\' || quote === "'") {
      out += ch;
      i++;
      continue;
    }
    const e = text[i + 1];
    if (multi && (e === ' ' || e === '\t' || e === '\r' || e === '\n')) {
      // a line-ending backslash: drops the newline and the whitespace that follows
      const rest = /[ \t]*\r?\n[ \t\r\n]*/y;
      rest.lastIndex = i + 1;
      if (!rest.exec(text)) return undefined;
      i = rest.lastIndex;
    } else if (e in ESCAPES) {
      out += ESCAPES[e];
      i += 2;
    } else if (e === 'u' || e === 'U') {
      const digits = e === 'u' ? 4 : 8;
      const hex = text.slice(i + 2, i + 2 + digits);
      const cp = /^[0-9A-Fa-f]+$/.test(hex) && hex.length === digits ? parseInt(hex, 16) : -1;
      if (cp < 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return undefined;
      out += String.fromCodePoint(cp);
      i += 2 + digits;
    } else {
      return undefined;
    }
  }
  return undefined;
}

function sameBytes(a, b) {
  if (a === undefined || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export const lifecycle = {
  info() {
    return { name: NAME, version: VERSION };
  },
  init(config) {
    const settings = parseConfig(config);
    headerName = settings.header;
    dropValue = new TextEncoder().encode(settings.equals);
    log('info', `dropping records whose header "${settings.header}" equals "${settings.equals}"`);
  },
};

export const recordFilter = {
  filter(batch) {
    return batch.records.map(
      (r) => !r.headers.some((h) => h.key === headerName && sameBytes(h.value, dropValue)),
    );
  },
};
