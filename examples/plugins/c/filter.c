// Example refract record filter in C.
//
// Drops every record that has a header named `header` (default "env") whose value is exactly the
// UTF-8 bytes of `equals` (default "test"); keeps all others, including records whose matching
// header is null.

#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bindings/filter_plugin.h"

#define NAME "example-filter-c"
#define VERSION "0.1.0"
#define UNKNOWN_KEY ": unknown key (expected header or equals)"

typedef struct {
  char *ptr;  // NUL-terminated copy; len is authoritative (a TOML string may hold "\u0000")
  size_t len;
} bytes_t;

static bytes_t header_name;
static bytes_t drop_value;

static bytes_t bytes_from(const char *ptr, size_t len) {
  bytes_t b = {malloc(len + 1), len};
  if (len) memcpy(b.ptr, ptr, len);
  b.ptr[len] = '\0';
  return b;
}

// Messages are built by concatenation (no stdio), which keeps the component free of WASI imports.
// Each argument is a NUL-terminated string; the list ends with NULL. The result is malloc'd.
static void set_message(filter_plugin_string_t *out, ...) {
  va_list ap;
  size_t len = 0;
  va_start(ap, out);
  for (const char *s; (s = va_arg(ap, const char *));) len += strlen(s);
  va_end(ap);
  out->ptr = malloc(len + 1);
  out->len = 0;
  va_start(ap, out);
  for (const char *s; (s = va_arg(ap, const char *));) {
    memcpy(out->ptr + out->len, s, strlen(s));
    out->len += strlen(s);
  }
  va_end(ap);
}

// ---- config: `key = "string"` lines, the subset of TOML that a table of string settings
// ---- serializes to; comments and blank lines are skipped, anything else is an error naming its key

typedef struct {
  const char *p, *end;
} cursor_t;

static void skip_ws(cursor_t *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t')) c->p++;
}

static bool at_line_end(cursor_t *c) {
  skip_ws(c);
  if (c->p < c->end && *c->p == '#')
    while (c->p < c->end && *c->p != '\n') c->p++;
  if (c->p < c->end && *c->p == '\r') c->p++;
  return c->p == c->end || *c->p == '\n';
}

static int hex(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

static size_t put_utf8(char *out, unsigned long cp) {
  if (cp < 0x80) { out[0] = (char)cp; return 1; }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | cp >> 12); out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | cp >> 18); out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  out[2] = (char)(0x80 | (cp >> 6 & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

static bool starts_with(const cursor_t *c, const char *p, char ch, int count) {
  if (c->end - p < count) return false;
  for (int i = 0; i < count; i++)
    if (p[i] != ch) return false;
  return true;
}

// Reads the string at the cursor ("...", '...', and with `multi_line` also """...""" and
// '''...''') into *out (malloc'd) and moves past its closing quote.
static bool read_string(cursor_t *c, bool multi_line, bytes_t *out) {
  if (c->p >= c->end || (*c->p != '"' && *c->p != '\'')) return false;
  char quote = *c->p;
  bool multi = starts_with(c, c->p, quote, 3);
  if (multi && !multi_line) return false;
  const char *p = c->p + (multi ? 3 : 1);
  if (multi && p < c->end && *p == '\n') p++;
  else if (multi && c->end - p >= 2 && p[0] == '\r' && p[1] == '\n') p += 2;
  char *buf = malloc((size_t)(c->end - p) + 1);
  size_t n = 0;
  while (p < c->end) {
    char ch = *p;
    if (multi && starts_with(c, p, quote, 3)) {
      int run = 3;
      while (run < 5 && p + run < c->end && p[run] == quote) run++;
      for (int i = 3; i < run; i++) buf[n++] = quote;
      c->p = p + run;
      buf[n] = '\0';
      out->ptr = buf;
      out->len = n;
      return true;
    }
    if (!multi && ch == quote) {
      c->p = p + 1;
      buf[n] = '\0';
      out->ptr = buf;
      out->len = n;
      return true;
    }
    if (ch == '\n' && !multi) break;
    p++;
    if (ch != '\\' || quote == '\'') {
      buf[n++] = ch;
      continue;
    }
    if (p >= c->end) break;
    char e = *p++;
    int digits = 0;
    switch (e) {
      case 'b': buf[n++] = '\b'; continue;
      case 't': buf[n++] = '\t'; continue;
      case 'n': buf[n++] = '\n'; continue;
      case 'f': buf[n++] = '\f'; continue;
      case 'r': buf[n++] = '\r'; continue;
      case '"': buf[n++] = '"'; continue;
      case '\\': buf[n++] = '\\'; continue;
      case 'u': digits = 4; break;
      case 'U': digits = 8; break;
      case ' ': case '\t': case '\r': case '\n':
        if (!multi) goto fail;
        // a line-ending backslash: drops the newline and the whitespace that follows
        p--;
        while (p < c->end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
        if (p >= c->end || *p != '\n') goto fail;
        while (p < c->end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
        continue;
      default: goto fail;
    }
    if (c->end - p < digits) goto fail;
    unsigned long cp = 0;
    for (int i = 0; i < digits; i++) {
      int h = hex(*p++);
      if (h < 0) goto fail;
      cp = cp << 4 | (unsigned long)h;
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) goto fail;
    n += put_utf8(buf + n, cp);
  }
fail:
  free(buf);
  return false;
}

static bool key_is(const bytes_t *key, const char *name) {
  return key->len == strlen(name) && memcmp(key->ptr, name, key->len) == 0;
}

// On success replaces header_name and drop_value; on failure leaves them and writes *err.
static bool parse_config(const char *text, size_t len, filter_plugin_string_t *err) {
  bytes_t settings[2] = {bytes_from("env", 3), bytes_from("test", 4)};  // header, equals
  bool seen[2] = {false, false};
  cursor_t c = {text, text + len};
  bool ok = true;
  while (ok && c.p < c.end) {
    skip_ws(&c);
    if (at_line_end(&c)) { if (c.p < c.end) c.p++; continue; }
    bytes_t key = {0};
    if (*c.p == '[') {
      const char *start = c.p;
      while (start < c.end && (*start == '[' || *start == ' ')) start++;
      const char *stop = start;
      while (stop < c.end && *stop != ']' && *stop != '\n') stop++;
      while (stop > start && stop[-1] == ' ') stop--;
      bytes_t table = bytes_from(start, (size_t)(stop - start));
      set_message(err, table.ptr, UNKNOWN_KEY, NULL);
      free(table.ptr);
      ok = false;
      break;
    }
    if (*c.p == '"' || *c.p == '\'') {
      if (!read_string(&c, false, &key)) { set_message(err, "cannot read a quoted key", NULL); ok = false; break; }
    } else {
      const char *start = c.p;
      while (c.p < c.end && *c.p != '=' && *c.p != ' ' && *c.p != '\t' && *c.p != '\n') c.p++;
      key = bytes_from(start, (size_t)(c.p - start));
    }
    int slot = key_is(&key, "header") ? 0 : key_is(&key, "equals") ? 1 : -1;
    skip_ws(&c);
    if (c.p >= c.end || *c.p != '=') {
      set_message(err, key.ptr, ": expected `=`", NULL);
      ok = false;
    } else if (slot < 0) {
      set_message(err, key.ptr, UNKNOWN_KEY, NULL);
      ok = false;
    } else if (seen[slot]) {
      set_message(err, key.ptr, ": duplicate key", NULL);
      ok = false;
    } else {
      c.p++;
      skip_ws(&c);
      bytes_t value;
      if (!read_string(&c, true, &value)) {
        set_message(err, key.ptr, ": expected a string", NULL);
        ok = false;
      } else if (!at_line_end(&c)) {
        free(value.ptr);
        set_message(err, key.ptr, ": expected a string", NULL);
        ok = false;
      } else {
        free(settings[slot].ptr);
        settings[slot] = value;
        seen[slot] = true;
      }
    }
    free(key.ptr);
  }
  if (ok && settings[0].len == 0) {
    set_message(err, "header: must not be empty", NULL);
    ok = false;
  }
  if (!ok) {
    free(settings[0].ptr);
    free(settings[1].ptr);
    return false;
  }
  free(header_name.ptr);
  free(drop_value.ptr);
  header_name = settings[0];
  drop_value = settings[1];
  return true;
}

// ---- exports ---------------------------------------------------------------------------------

void exports_refract_plugin_lifecycle_info(exports_refract_plugin_lifecycle_plugin_info_t *ret) {
  filter_plugin_string_dup(&ret->name, NAME);
  filter_plugin_string_dup(&ret->version, VERSION);
}

bool exports_refract_plugin_lifecycle_init(filter_plugin_string_t *config,
                                           exports_refract_plugin_lifecycle_plugin_error_t *err) {
  filter_plugin_string_t message;
  bool ok = parse_config((const char *)config->ptr, config->len, &message);
  filter_plugin_string_free(config);
  if (!ok) {
    err->tag = REFRACT_PLUGIN_TYPES_PLUGIN_ERROR_INVALID_CONFIG;
    err->val.invalid_config = message;
    return false;
  }
  set_message(&message, "dropping records whose header \"", header_name.ptr, "\" equals \"",
              drop_value.ptr, "\"", NULL);
  refract_plugin_host_log(REFRACT_PLUGIN_TYPES_LOG_LEVEL_INFO, &message);
  filter_plugin_string_free(&message);
  return true;
}

static bool matches(const refract_plugin_types_header_t *h) {
  return h->key.len == header_name.len && memcmp(h->key.ptr, header_name.ptr, h->key.len) == 0 &&
         h->value.is_some && h->value.val.len == drop_value.len &&
         (drop_value.len == 0 || memcmp(h->value.val.ptr, drop_value.ptr, drop_value.len) == 0);
}

bool exports_refract_plugin_record_filter_filter(
    exports_refract_plugin_record_filter_record_batch_t *batch, filter_plugin_list_bool_t *ret,
    exports_refract_plugin_record_filter_plugin_error_t *err) {
  (void)err;
  size_t n = batch->records.len;
  ret->len = n;
  ret->ptr = n ? malloc(n * sizeof(bool)) : NULL;
  for (size_t i = 0; i < n; i++) {
    const refract_plugin_types_kafka_record_t *r = &batch->records.ptr[i];
    bool keep = true;
    for (size_t j = 0; keep && j < r->headers.len; j++) keep = !matches(&r->headers.ptr[j]);
    ret->ptr[i] = keep;
  }
  exports_refract_plugin_record_filter_record_batch_free(batch);
  return true;
}
