// refract_plugin.h: header-only helpers for refract plugins written in C.
//
// Works with the bindings of any world in wit/plugin.wit (policy-plugin, filter-plugin,
// transform-plugin) and with none: it never names a generated type. It uses malloc, free, memcpy
// and friends only (no stdio), so a plugin that includes it still needs no WASI imports.
//
// Three parts:
//
// - Strings: `refract_str_t` is a borrowed (pointer, length) view, `refract_buf_t` an owned
//   malloc'd buffer that is always NUL-terminated at ptr[len]. REFRACT_VIEW(x) views any generated
//   string (`*_string_t`, `list<u8>`); REFRACT_MOVE(dst, buf) hands a buffer to a generated
//   string, which then owns it (the canonical ABI frees results after the call).
// - MirrorMaker 2: `refract_mm2_*` reproduce DefaultReplicationPolicy byte for byte (topicSource,
//   upstreamTopic, isInternalTopic, offsetSyncsTopic, checkpointsTopic, ...), as the Rust SDK's
//   plugins/sdk/src/mm2.rs does.
// - Config: `refract_config_*` iterate over the TOML text that `init` receives, entry by entry,
//   with the decoded key path, and build error texts of the form `<key path>: <reason>`.
//
// Allocation failure calls abort() (a trap in WebAssembly). Views never own memory.

#ifndef REFRACT_PLUGIN_H
#define REFRACT_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

// ==== strings ==================================================================================

// A borrowed view of bytes (usually UTF-8 text); not NUL-terminated in general.
typedef struct refract_str {
  const char *ptr;
  size_t len;
} refract_str_t;

// An owned, malloc'd buffer; ptr[len] is always '\0' (ptr is NULL only for a freed buffer).
typedef struct refract_buf {
  char *ptr;
  size_t len;
} refract_buf_t;

// A view of a string literal, without strlen: REFRACT_LIT("heartbeats").
#define REFRACT_LIT(s) ((refract_str_t){"" s, sizeof(s) - 1})

// A view of a generated string or list<u8> (any struct with `ptr` and `len`), e.g.
// REFRACT_VIEW(*config) or REFRACT_VIEW(topics->ptr[i]).
#define REFRACT_VIEW(x) refract_str((const char *)(x).ptr, (x).len)

// Moves `buf` into the generated string `dst` (an lvalue with `uint8_t *ptr` and `size_t len`):
// `dst` owns the memory afterwards. An empty buffer is freed and `dst` gets NULL, as the generated
// free functions and post-return code only free strings with len > 0.
#define REFRACT_MOVE(dst, buf)                               \
  do {                                                       \
    refract_buf_t refract_moved_ = refract_buf_release(buf); \
    (dst).ptr = (uint8_t *)refract_moved_.ptr;               \
    (dst).len = refract_moved_.len;                          \
  } while (0)

// Joins views into a new buffer: REFRACT_JOIN(source, separator, topic).
#define REFRACT_JOIN(...)                        \
  refract_join((const refract_str_t[]){__VA_ARGS__}, \
               sizeof((const refract_str_t[]){__VA_ARGS__}) / sizeof(refract_str_t))

static inline refract_str_t refract_str(const char *ptr, size_t len) {
  refract_str_t s = {ptr, len};
  return s;
}

// A view of a NUL-terminated string (without the NUL).
static inline refract_str_t refract_cstr(const char *s) { return refract_str(s, strlen(s)); }

// malloc that never returns NULL (aborts instead); `size` 0 allocates 1 byte.
static inline void *refract_alloc(size_t size) {
  void *p = malloc(size ? size : 1);
  if (!p) abort();
  return p;
}

// A new buffer of `len` bytes (uninitialized) plus the terminating NUL.
static inline refract_buf_t refract_buf_new(size_t len) {
  refract_buf_t b;
  if (len == SIZE_MAX) abort();
  b.ptr = (char *)refract_alloc(len + 1);
  b.len = len;
  b.ptr[len] = '\0';
  return b;
}

// A malloc'd, NUL-terminated copy of `s`.
static inline refract_buf_t refract_dup(refract_str_t s) {
  refract_buf_t b = refract_buf_new(s.len);
  if (s.len) memcpy(b.ptr, s.ptr, s.len);
  return b;
}

static inline refract_buf_t refract_dup_cstr(const char *s) { return refract_dup(refract_cstr(s)); }

// The concatenation of `n` views in a new buffer.
static inline refract_buf_t refract_join(const refract_str_t *parts, size_t n) {
  size_t len = 0;
  for (size_t i = 0; i < n; i++) {
    if (parts[i].len > SIZE_MAX - 1 - len) abort();
    len += parts[i].len;
  }
  refract_buf_t b = refract_buf_new(len);
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    if (parts[i].len) memcpy(b.ptr + at, parts[i].ptr, parts[i].len);
    at += parts[i].len;
  }
  return b;
}

static inline refract_str_t refract_buf_view(refract_buf_t b) { return refract_str(b.ptr, b.len); }

// Frees the buffer and leaves it {NULL, 0}; safe to call twice.
static inline void refract_buf_free(refract_buf_t *b) {
  free(b->ptr);
  b->ptr = NULL;
  b->len = 0;
}

// Returns `b` ready to be owned by a generated string: an empty buffer is freed and becomes
// {NULL, 0}. Used by REFRACT_MOVE.
static inline refract_buf_t refract_buf_release(refract_buf_t b) {
  if (b.len == 0) {
    free(b.ptr);
    b.ptr = NULL;
  }
  return b;
}

static inline bool refract_eq(refract_str_t a, refract_str_t b) {
  return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

// Whether `a` holds exactly the bytes of the NUL-terminated `b`.
static inline bool refract_eq_cstr(refract_str_t a, const char *b) {
  return refract_eq(a, refract_cstr(b));
}

static inline bool refract_starts_with(refract_str_t s, refract_str_t prefix) {
  return s.len >= prefix.len && (prefix.len == 0 || memcmp(s.ptr, prefix.ptr, prefix.len) == 0);
}

static inline bool refract_ends_with(refract_str_t s, refract_str_t suffix) {
  return s.len >= suffix.len &&
         (suffix.len == 0 || memcmp(s.ptr + s.len - suffix.len, suffix.ptr, suffix.len) == 0);
}

// `s` without its first `n` bytes (n <= s.len).
static inline refract_str_t refract_skip(refract_str_t s, size_t n) {
  return refract_str(s.ptr + n, s.len - n);
}

// Finds the first occurrence of a non-empty `needle` in `s` at or after `from`; stores its offset.
static inline bool refract_find(refract_str_t s, refract_str_t needle, size_t from, size_t *at) {
  if (needle.len == 0 || from > s.len) return false;
  for (size_t i = from; s.len - i >= needle.len; i++) {
    if (memcmp(s.ptr + i, needle.ptr, needle.len) == 0) {
      *at = i;
      return true;
    }
  }
  return false;
}

// Writes `n` in decimal into `digits` (at least 20 bytes, not NUL-terminated); returns a view.
static inline refract_str_t refract_u64_str(uint64_t n, char digits[20]) {
  size_t at = 20;
  do {
    digits[--at] = (char)('0' + n % 10);
    n /= 10;
  } while (n);
  return refract_str(digits + at, 20 - at);
}

// ==== MirrorMaker 2's DefaultReplicationPolicy =================================================
//
// `separator` is `replication.policy.separator` (never empty); `internal_separator` is what
// internal topic names use: the separator, or "." when `replication.policy.internal.topic.
// separator.enabled` is false (see refract_mm2_internal_separator).

#define REFRACT_MM2_DEFAULT_SEPARATOR "."
#define REFRACT_MM2_HEARTBEATS_TOPIC "heartbeats"

static inline refract_str_t refract_mm2_internal_separator(refract_str_t separator,
                                                           bool internal_topic_separator_enabled) {
  return internal_topic_separator_enabled ? separator : REFRACT_LIT(REFRACT_MM2_DEFAULT_SEPARATOR);
}

// formatRemoteTopic: `<source><separator><topic>`, malloc'd.
static inline refract_buf_t refract_mm2_format_remote_topic(refract_str_t source_cluster,
                                                            refract_str_t separator,
                                                            refract_str_t topic) {
  return REFRACT_JOIN(source_cluster, separator, topic);
}

// topicSource: the first token of Java's `topic.split(Pattern.quote(separator))` if there are at
// least two tokens once trailing empty tokens are dropped. On true, *source views a prefix of
// `topic` (possibly empty: ".b" has source ""). False for an empty separator.
static inline bool refract_mm2_topic_source(refract_str_t topic, refract_str_t separator,
                                            refract_str_t *source) {
  size_t at;
  if (!refract_find(topic, separator, 0, &at)) return false;
  // The tokens after the first are all empty exactly when the rest is the separator repeated.
  size_t rest = at + separator.len;
  while (topic.len - rest >= separator.len &&
         memcmp(topic.ptr + rest, separator.ptr, separator.len) == 0)
    rest += separator.len;
  if (rest == topic.len) return false;
  *source = refract_str(topic.ptr, at);
  return true;
}

// upstreamTopic: what follows the source and the first separator; *upstream views `topic`.
static inline bool refract_mm2_upstream_topic(refract_str_t topic, refract_str_t separator,
                                              refract_str_t *upstream) {
  refract_str_t source;
  if (!refract_mm2_topic_source(topic, separator, &source)) return false;
  *upstream = refract_skip(topic, source.len + separator.len);
  return true;
}

// isMM2InternalTopic: ends with `<internal separator>internal`.
static inline bool refract_mm2_is_mm2_internal_topic(refract_str_t topic,
                                                     refract_str_t internal_separator) {
  refract_str_t suffix = REFRACT_LIT("internal");
  if (!refract_ends_with(topic, suffix)) return false;
  return refract_ends_with(refract_str(topic.ptr, topic.len - suffix.len), internal_separator);
}

// isInternalTopic: MirrorMaker 2 internal, Kafka internal (`__...`, `.…`) or Connect internal
// (`...-internal`, `....internal`).
static inline bool refract_mm2_is_internal_topic(refract_str_t topic,
                                                 refract_str_t internal_separator) {
  return refract_mm2_is_mm2_internal_topic(topic, internal_separator) ||
         refract_starts_with(topic, REFRACT_LIT("__")) ||
         refract_starts_with(topic, REFRACT_LIT(".")) ||
         refract_ends_with(topic, REFRACT_LIT("-internal")) ||
         refract_ends_with(topic, REFRACT_LIT(".internal"));
}

// isCheckpointsTopic: ends with `<i>checkpoints<i>internal`.
static inline bool refract_mm2_is_checkpoints_topic(refract_str_t topic,
                                                    refract_str_t internal_separator) {
  const refract_str_t suffix[4] = {internal_separator, REFRACT_LIT("checkpoints"),
                                   internal_separator, REFRACT_LIT("internal")};
  for (int i = 3; i >= 0; i--) {
    if (!refract_ends_with(topic, suffix[i])) return false;
    topic.len -= suffix[i].len;
  }
  return true;
}

// IdentityReplicationPolicy's looksLikeHeartbeat: ends with "heartbeats".
static inline bool refract_mm2_looks_like_heartbeat(refract_str_t topic) {
  return refract_ends_with(topic, REFRACT_LIT(REFRACT_MM2_HEARTBEATS_TOPIC));
}

// heartbeatsTopic: "heartbeats", malloc'd.
static inline refract_buf_t refract_mm2_heartbeats_topic(void) {
  return refract_dup(REFRACT_LIT(REFRACT_MM2_HEARTBEATS_TOPIC));
}

// offsetSyncsTopic: `mm2-offset-syncs<i><alias><i>internal`, malloc'd.
static inline refract_buf_t refract_mm2_offset_syncs_topic(refract_str_t cluster_alias,
                                                           refract_str_t internal_separator) {
  return REFRACT_JOIN(REFRACT_LIT("mm2-offset-syncs"), internal_separator, cluster_alias,
                      internal_separator, REFRACT_LIT("internal"));
}

// checkpointsTopic: `<alias><i>checkpoints<i>internal`, malloc'd.
static inline refract_buf_t refract_mm2_checkpoints_topic(refract_str_t cluster_alias,
                                                          refract_str_t internal_separator) {
  return REFRACT_JOIN(cluster_alias, internal_separator, REFRACT_LIT("checkpoints"),
                      internal_separator, REFRACT_LIT("internal"));
}

// ==== config: the TOML text passed to `init` ===================================================
//
// The host writes the plugin's config table with Rust's `toml` crate, so the text uses a small
// part of TOML: `key = value` lines, then `[table]` sections (dotted for nested tables, `[[...]]`
// for arrays of tables), bare or quoted keys, and strings in any of the four quotings. The reader
// accepts that plus comments, blank lines, dotted keys and inline tables (`t = { a = "b" }`, whose
// entries follow the table's own entry, as after a header), and decodes strings (all TOML 1.1
// escapes), booleans and 64-bit integers; floats, dates and arrays are recognized and skipped,
// with their text in `raw`.
//
//   refract_config_t c;
//   refract_buf_t err = {0};  // stays {NULL, 0} unless something is wrong
//   refract_config_begin(&c, REFRACT_VIEW(*config));
//   while (!err.ptr && refract_config_next(&c, &err) > 0) {
//     if (!refract_eq_cstr(c.part[0], "prefix"))
//       err = refract_config_unknown_key(&c, 1, "prefix");
//     else if (c.depth > 1 || c.type != REFRACT_CONFIG_STRING)
//       err = refract_config_type_error(&c, 1, "a string");
//     else
//       prefix = refract_config_take_string(&c);
//   }
//   refract_config_end(&c);
//   if (err.ptr) ... return invalid-config(err), e.g. "prefix: expected a string, found integer"
//
// Every entry has a key path of `depth` decoded components in part[0..depth): those of the
// current `[section]` header first (section_depth of them), then those of the keys of any enclosing
// inline tables, then those of its own key. A header is an entry of its own (type
// REFRACT_CONFIG_TABLE or _TABLE_ARRAY, depth = section_depth), as is an inline table, so an empty
// table is seen too. `path` is the components joined with "." (as error texts name keys, e.g.
// `renames.orders-v1`). Everything an entry points to stays valid until the next call.
// Duplicate keys are not detected (the host never writes them).

typedef enum refract_config_type {
  REFRACT_CONFIG_STRING,        // str holds the decoded bytes (NUL-terminated; may contain NULs)
  REFRACT_CONFIG_BOOL,          // boolean
  REFRACT_CONFIG_INTEGER,       // integer
  REFRACT_CONFIG_FLOAT,         // only raw
  REFRACT_CONFIG_DATETIME,      // only raw
  REFRACT_CONFIG_ARRAY,         // only raw: `[...]`, possibly over several lines
  REFRACT_CONFIG_INLINE_TABLE,  // `key = {...}` (raw): its entries come next, under `key`
  REFRACT_CONFIG_TABLE,         // a `[header]` line
  REFRACT_CONFIG_TABLE_ARRAY,   // a `[[header]]` line: the entries after it are in the new element
} refract_config_type_t;

#ifndef REFRACT_CONFIG_MAX_DEPTH
#define REFRACT_CONFIG_MAX_DEPTH 8
#endif

typedef struct refract_config {
  // ---- the current entry (read only) ----
  refract_config_type_t type;
  size_t depth;                                   // components in part[]
  size_t section_depth;                           // how many of them come from the header
  refract_str_t part[REFRACT_CONFIG_MAX_DEPTH];   // decoded key path components
  refract_str_t path;                             // part[0..depth) joined with "."
  refract_str_t str;                              // REFRACT_CONFIG_STRING: the decoded string
  bool boolean;                                   // REFRACT_CONFIG_BOOL
  int64_t integer;                                // REFRACT_CONFIG_INTEGER
  refract_str_t raw;                              // the value (or header) as written
  // ---- private ----
  const char *start_, *p_, *end_;
  char *path_buf_, *str_buf_;
  size_t path_cap_, str_cap_, path_len_, str_len_;
  size_t part_off_[REFRACT_CONFIG_MAX_DEPTH], part_len_[REFRACT_CONFIG_MAX_DEPTH];
  size_t section_len_;                            // bytes of path_buf_ used by the header
  size_t inline_depth_;                           // inline tables open at the cursor
  size_t inline_path_len_[REFRACT_CONFIG_MAX_DEPTH], inline_key_depth_[REFRACT_CONFIG_MAX_DEPTH];
} refract_config_t;

// Starts reading `text`, which must stay valid while reading.
static inline void refract_config_begin(refract_config_t *c, refract_str_t text) {
  memset(c, 0, sizeof *c);
  c->start_ = c->p_ = text.ptr ? text.ptr : "";
  c->end_ = c->p_ + text.len;
  if (c->end_ - c->p_ >= 3 && memcmp(c->p_, "\xEF\xBB\xBF", 3) == 0) c->p_ += 3;  // a BOM
}

// Frees the reader's buffers; the last entry's views become invalid.
static inline void refract_config_end(refract_config_t *c) {
  free(c->path_buf_);
  free(c->str_buf_);
  c->path_buf_ = c->str_buf_ = NULL;
  c->path_cap_ = c->str_cap_ = c->path_len_ = c->str_len_ = 0;
}

// The first `depth` components of the entry's path joined with "." (0 or more than depth: all).
static inline refract_str_t refract_config_prefix(const refract_config_t *c, size_t depth) {
  if (depth == 0 || depth > c->depth) depth = c->depth;
  if (depth == 0) return refract_str(c->path.ptr, 0);
  return refract_str(c->path.ptr, (size_t)(c->part[depth - 1].ptr - c->path.ptr) +
                                      c->part[depth - 1].len);
}

// The entry's own key (the last component).
static inline refract_str_t refract_config_key(const refract_config_t *c) {
  return c->depth ? c->part[c->depth - 1] : refract_str(c->path.ptr, 0);
}

// "<first `depth` components of the path>: <reason>", malloc'd (depth 0: the whole path).
static inline refract_buf_t refract_config_error(const refract_config_t *c, size_t depth,
                                                 const char *reason) {
  return REFRACT_JOIN(refract_config_prefix(c, depth), REFRACT_LIT(": "), refract_cstr(reason));
}

// Takes the decoded string of a REFRACT_CONFIG_STRING entry: the caller owns the returned buffer
// (NUL-terminated; `len` counts any NUL bytes inside).
static inline refract_buf_t refract_config_take_string(refract_config_t *c) {
  refract_buf_t b;
  if (c->type != REFRACT_CONFIG_STRING || !c->str_buf_) return refract_dup(c->str);
  b.ptr = c->str_buf_;
  b.len = c->str_len_;
  c->str_buf_ = NULL;
  c->str_cap_ = c->str_len_ = 0;
  c->str = refract_str("", 0);
  return b;
}

// The type's name as Rust's toml crate words it: "string", "boolean", "integer", "float",
// "datetime", "array" (arrays of tables too) or "table" (inline too).
static inline const char *refract_config_type_name(refract_config_type_t type) {
  switch (type) {
    case REFRACT_CONFIG_STRING: return "string";
    case REFRACT_CONFIG_BOOL: return "boolean";
    case REFRACT_CONFIG_INTEGER: return "integer";
    case REFRACT_CONFIG_FLOAT: return "float";
    case REFRACT_CONFIG_DATETIME: return "datetime";
    case REFRACT_CONFIG_ARRAY:
    case REFRACT_CONFIG_TABLE_ARRAY: return "array";
    case REFRACT_CONFIG_INLINE_TABLE:
    case REFRACT_CONFIG_TABLE: return "table";
  }
  return "value";
}

// "<first `depth` components>: expected <expected>, found <type>", malloc'd, where <type> is that
// of the value at those components: the entry's type, or "table" when the entry lies deeper. The
// wording of the Rust SDK's ConfigTable: refract_config_type_error(&c, 1, "a string").
static inline refract_buf_t refract_config_type_error(const refract_config_t *c, size_t depth,
                                                      const char *expected) {
  const char *found = depth && depth < c->depth ? "table" : refract_config_type_name(c->type);
  return REFRACT_JOIN(refract_config_prefix(c, depth), REFRACT_LIT(": expected "),
                      refract_cstr(expected), REFRACT_LIT(", found "), refract_cstr(found));
}

// "<first `depth` components>: unknown key; expected one of: <known>", malloc'd (the Rust SDK's
// wording; list `known` sorted, comma-separated).
static inline refract_buf_t refract_config_unknown_key(const refract_config_t *c, size_t depth,
                                                       const char *known) {
  return REFRACT_JOIN(refract_config_prefix(c, depth),
                      REFRACT_LIT(": unknown key; expected one of: "), refract_cstr(known));
}

// ---- reader internals (names ending in `_`) ----

static inline void refract_grow_(char **buf, size_t *cap, size_t need) {
  if (need <= *cap) return;
  size_t cap2 = *cap ? *cap : 32;
  while (cap2 < need) {
    if (cap2 > SIZE_MAX / 2) abort();
    cap2 *= 2;
  }
  char *p = (char *)realloc(*buf, cap2);
  if (!p) abort();
  *buf = p;
  *cap = cap2;
}

static inline void refract_path_put_(refract_config_t *c, const char *s, size_t n) {
  refract_grow_(&c->path_buf_, &c->path_cap_, c->path_len_ + n + 1);
  if (n) memcpy(c->path_buf_ + c->path_len_, s, n);
  c->path_len_ += n;
  c->path_buf_[c->path_len_] = '\0';
}

static inline void refract_str_put_(refract_config_t *c, const char *s, size_t n) {
  refract_grow_(&c->str_buf_, &c->str_cap_, c->str_len_ + n + 1);
  if (n) memcpy(c->str_buf_ + c->str_len_, s, n);
  c->str_len_ += n;
  c->str_buf_[c->str_len_] = '\0';
}

static inline void refract_put_(refract_config_t *c, bool to_path, const char *s, size_t n) {
  if (to_path) refract_path_put_(c, s, n);
  else refract_str_put_(c, s, n);
}

static inline void refract_put_utf8_(refract_config_t *c, bool to_path, uint32_t cp) {
  char u[4];
  size_t n;
  if (cp < 0x80) {
    u[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    u[0] = (char)(0xC0 | cp >> 6);
    u[1] = (char)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    u[0] = (char)(0xE0 | cp >> 12);
    u[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    u[2] = (char)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    u[0] = (char)(0xF0 | cp >> 18);
    u[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    u[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    u[3] = (char)(0x80 | (cp & 0x3F));
    n = 4;
  }
  refract_put_(c, to_path, u, n);
}

static inline bool refract_is_ws_(char ch) { return ch == ' ' || ch == '\t'; }

static inline void refract_skip_ws_(refract_config_t *c) {
  while (c->p_ < c->end_ && refract_is_ws_(*c->p_)) c->p_++;
}

// Skips whitespace and a comment; true (and past the newline) at the end of a line or the text.
static inline bool refract_line_end_(refract_config_t *c) {
  refract_skip_ws_(c);
  if (c->p_ < c->end_ && *c->p_ == '#')
    while (c->p_ < c->end_ && *c->p_ != '\n') c->p_++;
  if (c->p_ == c->end_) return true;
  if (*c->p_ == '\n') {
    c->p_++;
    return true;
  }
  if (*c->p_ == '\r' && c->end_ - c->p_ >= 2 && c->p_[1] == '\n') {
    c->p_ += 2;
    return true;
  }
  return false;
}

static inline int refract_hex_(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

static inline bool refract_run_(const refract_config_t *c, const char *p, char ch, int count) {
  if (c->end_ - p < count) return false;
  for (int i = 0; i < count; i++)
    if (p[i] != ch) return false;
  return true;
}

// Decodes the string at the cursor ("...", '...', and if `multi_ok` """...""" and '''...''') and
// appends it to the path (`to_path`) or to str_buf_; moves past the closing quote.
static inline bool refract_read_string_(refract_config_t *c, bool multi_ok, bool to_path) {
  const char *p = c->p_;
  if (p >= c->end_ || (*p != '"' && *p != '\'')) return false;
  char quote = *p;
  bool multi = refract_run_(c, p, quote, 3);
  if (multi && !multi_ok) return false;
  p += multi ? 3 : 1;
  if (multi && p < c->end_ && *p == '\n') p++;  // a newline right after the opening is dropped
  else if (multi && c->end_ - p >= 2 && p[0] == '\r' && p[1] == '\n') p += 2;
  for (;;) {
    // copy the run of plain characters
    const char *run = p;
    while (p < c->end_ && *p != quote && *p != '\\' && *p != '\n' && *p != '\r') p++;
    refract_put_(c, to_path, run, (size_t)(p - run));
    if (p >= c->end_) return false;
    char ch = *p;
    if (ch == quote) {
      if (!multi) {
        c->p_ = p + 1;
        return true;
      }
      if (refract_run_(c, p, quote, 3)) {
        int n = 3;  // up to two quotes right before the closing three belong to the string
        while (n < 5 && p + n < c->end_ && p[n] == quote) n++;
        for (int i = 3; i < n; i++) refract_put_(c, to_path, &quote, 1);
        c->p_ = p + n;
        return true;
      }
      refract_put_(c, to_path, &quote, 1);
      p++;
      continue;
    }
    if (ch == '\n' || ch == '\r') {
      if (!multi) return false;
      if (ch == '\r' && !(c->end_ - p >= 2 && p[1] == '\n')) return false;
      refract_put_(c, to_path, p, ch == '\r' ? 2 : 1);
      p += ch == '\r' ? 2 : 1;
      continue;
    }
    if (quote == '\'') {  // a backslash in a literal string is plain
      refract_put_(c, to_path, p, 1);
      p++;
      continue;
    }
    // an escape in a basic string
    p++;
    if (p >= c->end_) return false;
    char e = *p++;
    char out = 0;
    int digits = 0;
    switch (e) {
      case 'b': out = '\b'; break;
      case 't': out = '\t'; break;
      case 'n': out = '\n'; break;
      case 'f': out = '\f'; break;
      case 'r': out = '\r'; break;
      case 'e': out = '\x1B'; break;
      case '"': out = '"'; break;
      case '\\': out = '\\'; break;
      case 'x': digits = 2; break;
      case 'u': digits = 4; break;
      case 'U': digits = 8; break;
      case ' ': case '\t': case '\r': case '\n': {
        if (!multi) return false;
        // a line-ending backslash drops the newline and the whitespace that follows it
        p--;
        while (p < c->end_ && (refract_is_ws_(*p) || *p == '\r')) p++;
        if (p >= c->end_ || *p != '\n') return false;
        while (p < c->end_ && (refract_is_ws_(*p) || *p == '\r' || *p == '\n')) p++;
        continue;
      }
      default: return false;
    }
    if (!digits) {
      refract_put_(c, to_path, &out, 1);
      continue;
    }
    if (c->end_ - p < digits) return false;
    uint32_t cp = 0;
    for (int i = 0; i < digits; i++) {
      int h = refract_hex_(*p++);
      if (h < 0) return false;
      cp = cp << 4 | (uint32_t)h;
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    refract_put_utf8_(c, to_path, cp);
  }
}

static inline bool refract_is_bare_(char ch) {
  return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '-';
}

// Reads a (dotted) key at the cursor, appending its components after the current path_len_.
static inline bool refract_read_key_(refract_config_t *c) {
  for (;;) {
    refract_skip_ws_(c);
    if (c->depth == REFRACT_CONFIG_MAX_DEPTH || c->p_ >= c->end_) return false;
    if (c->depth) refract_path_put_(c, ".", 1);
    size_t off = c->path_len_;
    if (*c->p_ == '"' || *c->p_ == '\'') {
      if (!refract_read_string_(c, false, true)) return false;
    } else {
      const char *s = c->p_;
      while (c->p_ < c->end_ && refract_is_bare_(*c->p_)) c->p_++;
      if (c->p_ == s) return false;
      refract_path_put_(c, s, (size_t)(c->p_ - s));
    }
    c->part_off_[c->depth] = off;
    c->part_len_[c->depth] = c->path_len_ - off;
    c->depth++;
    refract_skip_ws_(c);
    if (c->p_ >= c->end_ || *c->p_ != '.') return true;
    c->p_++;
  }
}

// Points part[] and path into path_buf_ (which may have moved).
static inline void refract_fix_views_(refract_config_t *c) {
  if (!c->path_buf_) refract_path_put_(c, "", 0);
  for (size_t i = 0; i < c->depth; i++)
    c->part[i] = refract_str(c->path_buf_ + c->part_off_[i], c->part_len_[i]);
  c->path = refract_str(c->path_buf_, c->path_len_);
}

static inline size_t refract_line_no_(const refract_config_t *c) {
  size_t line = 1;
  for (const char *p = c->start_; p < c->p_ && p < c->end_; p++) line += *p == '\n';
  return line;
}

// "<path>: <reason>", or "line N: <reason>" when no key has been read yet.
static inline refract_buf_t refract_syntax_error_(refract_config_t *c, const char *reason) {
  refract_fix_views_(c);
  if (c->depth) return refract_config_error(c, 0, reason);
  char digits[20];
  return REFRACT_JOIN(REFRACT_LIT("line "), refract_u64_str(refract_line_no_(c), digits),
                      REFRACT_LIT(": "), refract_cstr(reason));
}

// Skips a bracketed value (array or inline table), strings and comments included.
static inline bool refract_skip_nested_(refract_config_t *c) {
  int depth = 0;
  while (c->p_ < c->end_) {
    char ch = *c->p_;
    if (ch == '"' || ch == '\'') {
      if (!refract_read_string_(c, true, false)) return false;
      continue;
    }
    if (ch == '#') {
      while (c->p_ < c->end_ && *c->p_ != '\n') c->p_++;
      continue;
    }
    c->p_++;
    if (ch == '[' || ch == '{') depth++;
    if ((ch == ']' || ch == '}') && --depth == 0) return true;
  }
  return false;
}

static inline bool refract_is_digit_(char ch) { return ch >= '0' && ch <= '9'; }

// Parses a TOML integer (decimal with optional sign, 0x, 0o or 0b; `_` between digits).
static inline int refract_parse_int_(refract_str_t t, int64_t *out) {  // 1 ok, 0 not one, -1 range
  size_t i = 0;
  bool neg = false;
  unsigned base = 10;
  if (i < t.len && (t.ptr[i] == '+' || t.ptr[i] == '-')) neg = t.ptr[i++] == '-';
  if (t.len - i > 2 && t.ptr[i] == '0' && !neg && i == 0) {
    char b = t.ptr[i + 1];
    base = b == 'x' ? 16 : b == 'o' ? 8 : b == 'b' ? 2 : 10;
    if (base != 10) i += 2;
  }
  if (i >= t.len) return 0;
  uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  bool range = false, prev_digit = false;
  for (; i < t.len; i++) {
    char ch = t.ptr[i];
    if (ch == '_') {
      if (!prev_digit || i + 1 == t.len) return 0;
      prev_digit = false;
      continue;
    }
    int d = refract_hex_(ch);
    if (d < 0 || (unsigned)d >= base) return 0;
    prev_digit = true;
    if (v > (limit - (unsigned)d) / base) range = true;
    else v = v * base + (unsigned)d;
  }
  if (range) return -1;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return 1;
}

static inline bool refract_is_float_(refract_str_t t) {
  size_t i = 0;
  if (i < t.len && (t.ptr[i] == '+' || t.ptr[i] == '-')) i++;
  refract_str_t r = refract_skip(t, i);
  if (refract_eq_cstr(r, "inf") || refract_eq_cstr(r, "nan")) return true;
  if (i >= t.len || !refract_is_digit_(t.ptr[i])) return false;
  for (; i < t.len; i++) {
    char ch = t.ptr[i];
    if (!refract_is_digit_(ch) && ch != '_' && ch != '.' && ch != 'e' && ch != 'E' && ch != '+' &&
        ch != '-')
      return false;
  }
  return true;
}

// Reads a `[header]` or `[[header]]` line.
static inline int refract_read_header_(refract_config_t *c, refract_buf_t *err) {
  const char *open = c->p_;
  bool array = refract_run_(c, c->p_, '[', 2);
  c->p_ += array ? 2 : 1;
  c->depth = 0;
  c->path_len_ = 0;
  c->section_len_ = 0;
  c->section_depth = 0;
  if (!refract_read_key_(c)) {
    const char *why =
        c->depth == REFRACT_CONFIG_MAX_DEPTH ? "table nested too deeply" : "invalid table header";
    c->depth = 0;
    *err = refract_syntax_error_(c, why);
    return -1;
  }
  if (c->p_ >= c->end_ || *c->p_ != ']' || (array && !refract_run_(c, c->p_, ']', 2))) {
    *err = refract_syntax_error_(c, "invalid table header");
    return -1;
  }
  c->p_ += array ? 2 : 1;
  c->raw = refract_str(open, (size_t)(c->p_ - open));
  if (!refract_line_end_(c)) {
    *err = refract_syntax_error_(c, "expected the end of the line after the table header");
    return -1;
  }
  c->section_depth = c->depth;
  c->section_len_ = c->path_len_;
  c->type = array ? REFRACT_CONFIG_TABLE_ARRAY : REFRACT_CONFIG_TABLE;
  refract_fix_views_(c);
  return 1;
}

// Skips whitespace, newlines and comments (between the entries of an inline table).
static inline void refract_skip_blank_(refract_config_t *c) {
  for (;;) {
    refract_skip_ws_(c);
    if (c->p_ < c->end_ && *c->p_ == '#')
      while (c->p_ < c->end_ && *c->p_ != '\n') c->p_++;
    if (c->p_ >= c->end_ || (*c->p_ != '\n' && *c->p_ != '\r')) return;
    c->p_++;
  }
}

// What follows a value: the end of the line, or inside an inline table a `,` or the `}` that
// closes it (and maybe enclosing ones, up to the end of the line after the outermost).
static inline int refract_after_value_(refract_config_t *c, refract_buf_t *err) {
  for (;;) {
    if (c->inline_depth_ == 0) {
      if (refract_line_end_(c)) return 1;
      *err = refract_syntax_error_(c, "expected the end of the line after the value");
      return -1;
    }
    refract_skip_blank_(c);
    if (c->p_ < c->end_ && *c->p_ == ',') {
      c->p_++;
      return 1;
    }
    if (c->p_ >= c->end_ || *c->p_ != '}') {
      *err = refract_syntax_error_(c, "expected `,` or `}` after the value");
      return -1;
    }
    c->p_++;
    c->inline_depth_--;
  }
}

static inline bool refract_ends_token_(char ch) {
  return refract_is_ws_(ch) || ch == '#' || ch == '\n' || ch == '\r' || ch == ',' || ch == '}' ||
         ch == ']';
}

// Reads the value after `key =` into the entry.
static inline int refract_read_value_(refract_config_t *c, refract_buf_t *err) {
  refract_skip_ws_(c);
  const char *v = c->p_;
  if (v >= c->end_) {
    *err = refract_syntax_error_(c, "expected a value");
    return -1;
  }
  if (*v == '"' || *v == '\'') {
    c->str_len_ = 0;
    refract_str_put_(c, "", 0);
    if (!refract_read_string_(c, true, false)) {
      *err = refract_syntax_error_(c, "invalid string");
      return -1;
    }
    c->type = REFRACT_CONFIG_STRING;
    c->str = refract_str(c->str_buf_, c->str_len_);
  } else if (*v == '[' || *v == '{') {
    size_t keep = c->str_len_;  // skipping decodes strings into str_buf_
    if (!refract_skip_nested_(c)) {
      *err = refract_syntax_error_(c, *v == '[' ? "unterminated array" : "unterminated table");
      return -1;
    }
    c->str_len_ = keep;
    c->type = *v == '[' ? REFRACT_CONFIG_ARRAY : REFRACT_CONFIG_INLINE_TABLE;
  } else {
    while (c->p_ < c->end_ && !refract_ends_token_(*c->p_)) c->p_++;
    refract_str_t t = refract_str(v, (size_t)(c->p_ - v));
    // a local date-time may use a space instead of `T`: 1979-05-27 07:32:00
    if (t.len == 10 && t.ptr[4] == '-' && c->end_ - c->p_ >= 2 && c->p_[0] == ' ' &&
        refract_is_digit_(c->p_[1])) {
      c->p_++;
      while (c->p_ < c->end_ && !refract_ends_token_(*c->p_)) c->p_++;
      t = refract_str(v, (size_t)(c->p_ - v));
    }
    int n;
    if (refract_eq_cstr(t, "true") || refract_eq_cstr(t, "false")) {
      c->type = REFRACT_CONFIG_BOOL;
      c->boolean = t.len == 4;
    } else if ((n = refract_parse_int_(t, &c->integer)) != 0) {
      if (n < 0) {
        *err = refract_syntax_error_(c, "integer out of range");
        return -1;
      }
      c->type = REFRACT_CONFIG_INTEGER;
    } else if (t.len >= 5 && refract_is_digit_(t.ptr[0]) &&
               ((t.ptr[4] == '-' && refract_is_digit_(t.ptr[3])) || t.ptr[2] == ':')) {
      c->type = REFRACT_CONFIG_DATETIME;
    } else if (refract_is_float_(t)) {
      c->type = REFRACT_CONFIG_FLOAT;
    } else {
      *err = refract_syntax_error_(c, "invalid value");
      return -1;
    }
  }
  c->raw = refract_str(v, (size_t)(c->p_ - v));
  if (c->type == REFRACT_CONFIG_INLINE_TABLE) {
    // its entries come next, one by one, under this key
    c->p_ = v + 1;
    c->inline_path_len_[c->inline_depth_] = c->path_len_;
    c->inline_key_depth_[c->inline_depth_] = c->depth;
    c->inline_depth_++;
    return 1;
  }
  return refract_after_value_(c, err);
}

// Reads the next entry. Returns 1 with the entry in *c, 0 at the end of the text, or -1 on a
// syntax error, with a malloc'd `<key path>: <reason>` (or `line N: <reason>`) in *err.
static inline int refract_config_next(refract_config_t *c, refract_buf_t *err) {
  c->str = refract_str("", 0);
  c->raw = refract_str("", 0);
  c->boolean = false;
  c->integer = 0;
  for (;;) {
    if (c->inline_depth_) {  // inside an inline table: the next entry, or its end
      refract_skip_blank_(c);
      size_t level = c->inline_depth_ - 1;
      c->depth = c->inline_key_depth_[level];
      c->path_len_ = c->inline_path_len_[level];
      if (c->p_ < c->end_ && *c->p_ == '}') {
        c->p_++;
        c->inline_depth_--;
        if (refract_after_value_(c, err) < 0) return -1;
        continue;
      }
      break;
    }
    refract_skip_ws_(c);
    if (c->p_ >= c->end_) return 0;
    if (*c->p_ == '#' || *c->p_ == '\n' || *c->p_ == '\r') {
      if (!refract_line_end_(c)) {
        c->depth = 0;
        *err = refract_syntax_error_(c, "unexpected carriage return");
        return -1;
      }
      continue;
    }
    if (*c->p_ == '[') return refract_read_header_(c, err);
    c->depth = c->section_depth;
    c->path_len_ = c->section_len_;
    break;
  }

  // key = value
  size_t base = c->depth;
  if (!refract_read_key_(c)) {
    const char *why =
        c->depth == REFRACT_CONFIG_MAX_DEPTH ? "key nested too deeply" : "expected a key";
    if (c->depth == base) c->depth = 0;  // name the line, not the enclosing table
    *err = refract_syntax_error_(c, why);
    return -1;
  }
  if (c->p_ >= c->end_ || *c->p_ != '=') {
    *err = refract_syntax_error_(c, "expected `=` after the key");
    return -1;
  }
  c->p_++;
  if (refract_read_value_(c, err) < 0) return -1;
  refract_fix_views_(c);
  return 1;
}

#ifdef __cplusplus
}
#endif

#endif  // REFRACT_PLUGIN_H
