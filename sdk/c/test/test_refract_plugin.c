// Native unit tests of refract_plugin.h; run by sdk/c/test/run.sh.
// The MirrorMaker 2 cases are those of the Rust tests in plugins/sdk/src/mm2.rs.

#include "../refract_plugin.h"

#include <stdio.h>

static int failures, checks;

#define CHECK(cond)                                                   \
  do {                                                                \
    checks++;                                                         \
    if (!(cond)) {                                                    \
      failures++;                                                     \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
    }                                                                 \
  } while (0)

// Compares a view with an expected C string (NULL = "no value" and `has` false).
static void expect_opt(const char *what, const char *input, const char *sep, bool has,
                       refract_str_t got, const char *want) {
  checks++;
  bool ok = want ? has && refract_eq_cstr(got, want) : !has;
  if (!ok) {
    failures++;
    fprintf(stderr, "%s(\"%s\") with separator \"%s\": got %s%.*s%s, want %s%s%s\n", what, input,
            sep, has ? "\"" : "none", has ? (int)got.len : 0, has ? got.ptr : "", has ? "\"" : "",
            want ? "\"" : "none", want ? want : "", want ? "\"" : "");
  }
}

static void expect_buf(const char *what, refract_buf_t got, const char *want) {
  checks++;
  if (!refract_eq_cstr(refract_buf_view(got), want) || got.ptr[got.len] != '\0') {
    failures++;
    fprintf(stderr, "%s: got \"%.*s\", want \"%s\"\n", what, (int)got.len, got.ptr, want);
  }
  refract_buf_free(&got);
}

// ---- MirrorMaker 2 -----------------------------------------------------------------------------

static void test_topic_source_and_upstream_follow_java_split(void) {
  static const struct {
    const char *sep, *topic, *source, *upstream;
  } cases[] = {
      {".", "topic1", NULL, NULL},
      {".", "", NULL, NULL},
      {".", ".", NULL, NULL},
      {".", "..", NULL, NULL},
      {".", "a.", NULL, NULL},
      {".", "a..", NULL, NULL},
      {".", ".b", "", "b"},
      {".", "..b", "", ".b"},
      {".", "a.b", "a", "b"},
      {".", "a.b.c", "a", "b.c"},
      {".", "a..b", "a", ".b"},
      {".", "a.b.", "a", "b."},
      {".", "source1.topic4", "source1", "topic4"},
      {".", "source1.source2.topic5", "source1", "source2.topic5"},
      {".", "target.source.topic1", "target", "source.topic1"},
      {".", "source.target.topic1", "source", "target.topic1"},
      {".", "us-west.heartbeats", "us-west", "heartbeats"},
      {"__", "source1__topic4", "source1", "topic4"},
      {"__", "source1__source2__topic5", "source1", "source2__topic5"},
      {"__", "source1_topic4", NULL, NULL},
      {"__", "a___b", "a", "_b"},
      {"__", "a____b", "a", "__b"},
      {"__", "a__", NULL, NULL},
      {"__", "a____", NULL, NULL},
      {"__", "__b", "", "b"},
      {"-", "us-west.topic1", "us", "west.topic1"},
      {"::", "a::b", "a", "b"},
      {"\xC3\xA9", "a\xC3\xA9" "b\xC3\xA9" "c", "a", "b\xC3\xA9" "c"},  // "é", "aébéc"
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    refract_str_t topic = refract_cstr(cases[i].topic), sep = refract_cstr(cases[i].sep);
    refract_str_t got = {0};
    bool has = refract_mm2_topic_source(topic, sep, &got);
    expect_opt("topic_source", cases[i].topic, cases[i].sep, has, got, cases[i].source);
    if (has) CHECK(got.ptr == topic.ptr);  // a view into the topic
    has = refract_mm2_upstream_topic(topic, sep, &got);
    expect_opt("upstream_topic", cases[i].topic, cases[i].sep, has, got, cases[i].upstream);
  }
  // an empty separator never matches
  refract_str_t got;
  CHECK(!refract_mm2_topic_source(REFRACT_LIT("a.b"), REFRACT_LIT(""), &got));
}

static void test_format_remote_topic_prepends_source_and_separator(void) {
  static const struct {
    const char *sep, *source, *topic, *remote;
  } cases[] = {
      {".", "us-west", "topic1", "us-west.topic1"},
      {".", "primary", "heartbeats", "primary.heartbeats"},
      {".", "b", "a.topic1", "b.a.topic1"},
      {"__", "source1", "topic4", "source1__topic4"},
      {"-", "A", "", "A-"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    refract_str_t sep = refract_cstr(cases[i].sep);
    refract_buf_t remote = refract_mm2_format_remote_topic(refract_cstr(cases[i].source), sep,
                                                           refract_cstr(cases[i].topic));
    if (cases[i].topic[0]) {
      refract_str_t got;
      bool has = refract_mm2_topic_source(refract_buf_view(remote), sep, &got);
      expect_opt("topic_source", remote.ptr, cases[i].sep, has, got, cases[i].source);
      has = refract_mm2_upstream_topic(refract_buf_view(remote), sep, &got);
      expect_opt("upstream_topic", remote.ptr, cases[i].sep, has, got, cases[i].topic);
    }
    expect_buf("format_remote_topic", remote, cases[i].remote);
  }
}

static void test_internal_topic_names(void) {
  static const struct {
    const char *sep;
    bool internal_enabled;
    const char *offset_syncs, *checkpoints;
  } cases[] = {
      {"__", true, "mm2-offset-syncs__CLUSTER__internal", "CLUSTER__checkpoints__internal"},
      {"__", false, "mm2-offset-syncs.CLUSTER.internal", "CLUSTER.checkpoints.internal"},
      {".", true, "mm2-offset-syncs.CLUSTER.internal", "CLUSTER.checkpoints.internal"},
      {".", false, "mm2-offset-syncs.CLUSTER.internal", "CLUSTER.checkpoints.internal"},
      {"_", true, "mm2-offset-syncs_CLUSTER_internal", "CLUSTER_checkpoints_internal"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    refract_str_t isep =
        refract_mm2_internal_separator(refract_cstr(cases[i].sep), cases[i].internal_enabled);
    refract_str_t offset_syncs = refract_cstr(cases[i].offset_syncs);
    refract_str_t checkpoints = refract_cstr(cases[i].checkpoints);
    expect_buf("offset_syncs_topic", refract_mm2_offset_syncs_topic(REFRACT_LIT("CLUSTER"), isep),
               cases[i].offset_syncs);
    expect_buf("checkpoints_topic", refract_mm2_checkpoints_topic(REFRACT_LIT("CLUSTER"), isep),
               cases[i].checkpoints);
    expect_buf("heartbeats_topic", refract_mm2_heartbeats_topic(), "heartbeats");
    CHECK(refract_mm2_is_internal_topic(offset_syncs, isep));
    CHECK(refract_mm2_is_internal_topic(checkpoints, isep));
    CHECK(refract_mm2_is_mm2_internal_topic(offset_syncs, isep));
    CHECK(refract_mm2_is_checkpoints_topic(checkpoints, isep));
    CHECK(!refract_mm2_is_checkpoints_topic(offset_syncs, isep));
    CHECK(!refract_mm2_is_internal_topic(REFRACT_LIT("heartbeats"), isep));
  }
}

static void test_is_internal_topic_follows_mm2(void) {
  static const struct {
    const char *sep;
    bool internal_enabled;
    const char *topic;
    bool internal;
  } cases[] = {
      {"__", true, "__consumer_offsets", true},
      {"__", true, ".hiddentopic", true},
      {"__", true, "mm2-offsets.CLUSTER.internal", true},
      {"__", true, "mm2-offsets-CLUSTER-internal", true},
      {"__", true, "mm2-offsets_CLUSTER_internal", false},
      {"__", true, "mm2-offsets__CLUSTER__internal", true},
      {"__", false, "mm2-offsets__CLUSTER__internal", false},
      {"_", true, "mm2-offsets_CLUSTER_internal", true},
      {"_", false, "mm2-offsets_CLUSTER_internal", false},
      {".", true, "mm2-offsets_CLUSTER_internal", false},
      {".", true, "connect-configs", false},
      {".", true, "internal", false},
      {".", true, "topic1", false},
      {".", true, "_single_underscore", false},
      {".", true, "source.topic1", false},
      {".", true, "source.heartbeats", false},
      {".", true, "x.internal", true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    refract_str_t isep =
        refract_mm2_internal_separator(refract_cstr(cases[i].sep), cases[i].internal_enabled);
    checks++;
    if (refract_mm2_is_internal_topic(refract_cstr(cases[i].topic), isep) != cases[i].internal) {
      failures++;
      fprintf(stderr, "is_internal_topic(\"%s\") with separator \"%s\" (internal %d): want %d\n",
              cases[i].topic, cases[i].sep, cases[i].internal_enabled, cases[i].internal);
    }
  }
}

// MirrorMaker 2's MirrorSourceConnector.isCycle over the default policy (identity: only for
// heartbeat-like topics), as in mm2.rs.
static bool is_cycle(bool identity, const char *target, refract_str_t topic) {
  refract_str_t sep = REFRACT_LIT("."), source, upstream;
  if (identity && !refract_mm2_looks_like_heartbeat(topic)) return false;
  if (!refract_mm2_topic_source(topic, sep, &source)) return false;
  if (refract_eq_cstr(source, target)) return true;
  if (!refract_mm2_upstream_topic(topic, sep, &upstream)) return false;
  if (refract_eq(upstream, topic)) return false;
  return is_cycle(identity, target, upstream);
}

static void test_cycles_like_mm2(void) {
  static const struct {
    const char *topic;
    bool cycle;
  } dflt[] = {
      {"target.topic1", true},        {"target.source.topic1", true},
      {"source.target.topic1", true}, {"source.target.source.topic1", true},
      {"topic1", false},              {"source.topic1", false},
      {"other.source.topic1", false}, {"target.", false},
  },
    identity[] = {
        {"target.topic1", false},        {"target.source.topic1", false},
        {"source.target.topic1", false}, {"topic1", false},
        {"othersource.topic1", false},   {"target.heartbeats", true},
        {"target.source.heartbeats", true}, {"source.target.heartbeats", true},
        {"heartbeats", false},           {"othersource.heartbeats", false},
    };
  for (size_t i = 0; i < sizeof dflt / sizeof dflt[0]; i++)
    CHECK(is_cycle(false, "target", refract_cstr(dflt[i].topic)) == dflt[i].cycle);
  for (size_t i = 0; i < sizeof identity / sizeof identity[0]; i++)
    CHECK(is_cycle(true, "target", refract_cstr(identity[i].topic)) == identity[i].cycle);
  CHECK(refract_mm2_looks_like_heartbeat(REFRACT_LIT("myheartbeats")));
  CHECK(refract_mm2_looks_like_heartbeat(REFRACT_LIT("heartbeats")));
  CHECK(!refract_mm2_looks_like_heartbeat(REFRACT_LIT("heartbeats.x")));
}

// ---- strings ---------------------------------------------------------------------------------

static void test_strings(void) {
  refract_buf_t b = refract_dup(REFRACT_LIT("abc"));
  CHECK(b.len == 3 && strcmp(b.ptr, "abc") == 0);
  refract_buf_free(&b);
  CHECK(b.ptr == NULL && b.len == 0);
  refract_buf_free(&b);  // twice is fine

  b = refract_dup(refract_str(NULL, 0));
  CHECK(b.ptr != NULL && b.len == 0 && b.ptr[0] == '\0');
  // moving an empty buffer into a generated string frees it
  struct {
    uint8_t *ptr;
    size_t len;
  } wit = {(uint8_t *)1, 7};
  REFRACT_MOVE(wit, b);
  CHECK(wit.ptr == NULL && wit.len == 0);
  REFRACT_MOVE(wit, refract_dup_cstr("xyz"));
  CHECK(wit.len == 3 && memcmp(wit.ptr, "xyz", 3) == 0);
  CHECK(refract_eq_cstr(REFRACT_VIEW(wit), "xyz"));
  free(wit.ptr);

  expect_buf("join", REFRACT_JOIN(REFRACT_LIT("a"), REFRACT_LIT(""), refract_cstr("bc")), "abc");
  expect_buf("join of one", REFRACT_JOIN(REFRACT_LIT("x")), "x");

  CHECK(refract_eq(REFRACT_LIT(""), refract_str(NULL, 0)));
  CHECK(!refract_eq_cstr(REFRACT_LIT("ab"), "abc"));
  CHECK(refract_eq_cstr(refract_str("a\0b", 3), "a") == false);
  CHECK(refract_starts_with(REFRACT_LIT("__x"), REFRACT_LIT("__")));
  CHECK(!refract_starts_with(REFRACT_LIT("_"), REFRACT_LIT("__")));
  CHECK(refract_ends_with(REFRACT_LIT("x"), REFRACT_LIT("")));
  size_t at = 99;
  CHECK(refract_find(REFRACT_LIT("aXbXc"), REFRACT_LIT("X"), 2, &at) && at == 3);
  CHECK(!refract_find(REFRACT_LIT("abc"), REFRACT_LIT("abcd"), 0, &at));
  CHECK(!refract_find(REFRACT_LIT("abc"), REFRACT_LIT(""), 0, &at));

  char digits[20];
  CHECK(refract_eq_cstr(refract_u64_str(0, digits), "0"));
  CHECK(refract_eq_cstr(refract_u64_str(18446744073709551615u, digits), "18446744073709551615"));
}

// ---- config ----------------------------------------------------------------------------------

// Reads all of `text` into one line per entry: "<path>=<type>:<value>", joined with "\n"; a syntax
// error ends it with "ERROR <message>".
static char out[4096];

static const char *dump(const char *text) {
  refract_config_t c;
  refract_buf_t err = {0};
  size_t n = 0;
  int more;
  out[0] = '\0';
  refract_config_begin(&c, refract_cstr(text));
  while ((more = refract_config_next(&c, &err)) > 0) {
    char value[512];
    switch (c.type) {
      case REFRACT_CONFIG_STRING:
        snprintf(value, sizeof value, "%.*s", (int)c.str.len, c.str.ptr);
        CHECK(c.str.ptr[c.str.len] == '\0');
        break;
      case REFRACT_CONFIG_BOOL: snprintf(value, sizeof value, "%s", c.boolean ? "T" : "F"); break;
      case REFRACT_CONFIG_INTEGER:
        snprintf(value, sizeof value, "%lld", (long long)c.integer);
        break;
      default: snprintf(value, sizeof value, "%.*s", (int)c.raw.len, c.raw.ptr); break;
    }
    CHECK(refract_eq(refract_config_prefix(&c, 0), c.path));
    CHECK(c.section_depth <= c.depth);
    n += (size_t)snprintf(out + n, sizeof out - n, "%s%.*s/%zu=%s:%s", n ? "\n" : "",
                          (int)c.path.len, c.path.ptr, c.section_depth,
                          refract_config_type_name(c.type), value);
  }
  if (more < 0) {
    n += (size_t)snprintf(out + n, sizeof out - n, "%sERROR %s", n ? "\n" : "", err.ptr);
    refract_buf_free(&err);
  }
  refract_config_end(&c);
  return out;
}

#define EXPECT_DUMP(text, want)                                                          \
  do {                                                                                   \
    const char *got_ = dump(text);                                                       \
    checks++;                                                                            \
    if (strcmp(got_, want) != 0) {                                                       \
      failures++;                                                                        \
      fprintf(stderr, "%s:%d: reading %s\n--- got\n%s\n--- want\n%s\n", __FILE__, __LINE__, \
              #text, got_, want);                                                        \
    }                                                                                    \
  } while (0)

static void test_config_reader(void) {
  EXPECT_DUMP("", "");
  EXPECT_DUMP("\n  \n# only a comment\r\n", "");
  // what Rust's toml crate writes for {separator="__", internal_topic_separator_enabled=false,
  // renames={"orders-v1"="orders", "a.b"="c", "it's"="x\"y"}}
  EXPECT_DUMP("separator = \"__\"\n"
              "internal_topic_separator_enabled = false\n"
              "\n"
              "[renames]\n"
              "\"a.b\" = \"c\"\n"
              "\"it's\" = 'x\"y'\n"
              "orders-v1 = \"orders\"\n",
              "separator/0=string:__\n"
              "internal_topic_separator_enabled/0=boolean:F\n"
              "renames/1=table:[renames]\n"
              "renames.a.b/1=string:c\n"
              "renames.it's/1=string:x\"y\n"
              "renames.orders-v1/1=string:orders");
  // the parts keep a quoted key's dots
  {
    refract_config_t c;
    refract_buf_t err = {0};
    refract_config_begin(&c, REFRACT_LIT("[\"x.y\"]\n'a.b'.c = 1 # comment\n"));
    CHECK(refract_config_next(&c, &err) == 1 && c.type == REFRACT_CONFIG_TABLE && c.depth == 1 &&
          refract_eq_cstr(c.part[0], "x.y"));
    CHECK(refract_config_next(&c, &err) == 1 && c.type == REFRACT_CONFIG_INTEGER && c.depth == 3 &&
          c.section_depth == 1 && refract_eq_cstr(c.part[0], "x.y") &&
          refract_eq_cstr(c.part[1], "a.b") && refract_eq_cstr(c.part[2], "c") &&
          refract_eq_cstr(refract_config_key(&c), "c") &&
          refract_eq_cstr(refract_config_prefix(&c, 2), "x.y.a.b") && c.integer == 1);
    refract_buf_t e = refract_config_error(&c, 1, "unknown key");
    CHECK(strcmp(e.ptr, "x.y: unknown key") == 0);
    refract_buf_free(&e);
    e = refract_config_error(&c, 0, "expected a string");
    CHECK(strcmp(e.ptr, "x.y.a.b.c: expected a string") == 0);
    refract_buf_free(&e);
    e = refract_config_type_error(&c, 0, "a string");
    CHECK(strcmp(e.ptr, "x.y.a.b.c: expected a string, found integer") == 0);
    refract_buf_free(&e);
    e = refract_config_type_error(&c, 2, "a string");  // x.y.a.b holds a table
    CHECK(strcmp(e.ptr, "x.y.a.b: expected a string, found table") == 0);
    refract_buf_free(&e);
    e = refract_config_unknown_key(&c, 1, "a, b");
    CHECK(strcmp(e.ptr, "x.y: unknown key; expected one of: a, b") == 0);
    refract_buf_free(&e);
    CHECK(refract_config_next(&c, &err) == 0 && err.ptr == NULL);
    CHECK(refract_config_next(&c, &err) == 0);
    refract_config_end(&c);
  }
  // escapes (TOML 1.1 \e and \x included) and the four kinds of string
  EXPECT_DUMP("a = \"t\\tq\\\"b\\\\s\\u00e9\\U0001F600\\e\\x41\"\n"
              "b = 'C:\\dir\\'\n"
              "c = \"\"\"\nline 1\nline \"2\" \\\n    continued\"\"\"\n"
              "d = '''\n'quoted' \\n'''\n"
              "e = \"\"\"two quotes at the end\"\"\"\"\"\n"
              "f = \"\"\n",
              "a/0=string:t\tq\"b\\s\xC3\xA9\xF0\x9F\x98\x80\x1B" "A\n"
              "b/0=string:C:\\dir\\\n"
              "c/0=string:line 1\nline \"2\" continued\n"
              "d/0=string:'quoted' \\n\n"
              "e/0=string:two quotes at the end\"\"\n"
              "f/0=string:");
  // a NUL in a string is kept, and counted
  {
    refract_config_t c;
    refract_buf_t err = {0};
    refract_config_begin(&c, REFRACT_LIT("k = \"a\\u0000b\""));
    CHECK(refract_config_next(&c, &err) == 1 && c.str.len == 3 && c.str.ptr[1] == '\0');
    refract_buf_t s = refract_config_take_string(&c);
    CHECK(s.len == 3 && memcmp(s.ptr, "a\0b", 4) == 0);
    refract_buf_free(&s);
    refract_config_end(&c);
  }
  // other values are recognized and skipped
  EXPECT_DUMP("i = -42\nh = 0xff\nbig = 9_223_372_036_854_775_807\n"
              "min = -9223372036854775808\nb = true\n"
              "f = 1.5e3\ng = -inf\nd = 1979-05-27T07:32:00Z\nl = 1979-05-27 07:32:00\n"
              "t = 07:32:00\n"
              "arr = [1, \"]\", # comment ]\n  [2]]\ninl = {x = 1, y = \"}\"}\n",
              "i/0=integer:-42\n"
              "h/0=integer:255\n"
              "big/0=integer:9223372036854775807\n"
              "min/0=integer:-9223372036854775808\n"
              "b/0=boolean:T\n"
              "f/0=float:1.5e3\n"
              "g/0=float:-inf\n"
              "d/0=datetime:1979-05-27T07:32:00Z\n"
              "l/0=datetime:1979-05-27 07:32:00\n"
              "t/0=datetime:07:32:00\n"
              "arr/0=array:[1, \"]\", # comment ]\n  [2]]\n"
              "inl/0=table:{x = 1, y = \"}\"}\n"
              "inl.x/0=integer:1\n"
              "inl.y/0=string:}");
  // inline tables: nested, over several lines (TOML 1.1), with a trailing comma, in a section
  EXPECT_DUMP("[s]\nt = { a = { 'b.c' = 'd' }, e = [1, {f = 2}],\n  # note\n  g.h = true, }\n"
              "empty = {}\nlast = 1\n",
              "s/1=table:[s]\n"
              "s.t/1=table:{ a = { 'b.c' = 'd' }, e = [1, {f = 2}],\n  # note\n  g.h = true, }\n"
              "s.t.a/1=table:{ 'b.c' = 'd' }\n"
              "s.t.a.b.c/1=string:d\n"
              "s.t.e/1=array:[1, {f = 2}]\n"
              "s.t.g.h/1=boolean:T\n"
              "s.empty/1=table:{}\n"
              "s.last/1=integer:1");
  // nested tables and arrays of tables
  EXPECT_DUMP("[a.b]\nx = 1\n[[rules]]\nm = 'x'\n[[rules]]\n",
              "a.b/2=table:[a.b]\na.b.x/2=integer:1\nrules/1=array:[[rules]]\n"
              "rules.m/1=string:x\nrules/1=array:[[rules]]");
}

static void test_config_errors(void) {
  EXPECT_DUMP("a = 1\nb = \"unterminated\n", "a/0=integer:1\nERROR b: invalid string");
  EXPECT_DUMP("a = 1\n= 2\n", "a/0=integer:1\nERROR line 2: expected a key");
  EXPECT_DUMP("[t]\n= 2\n", "t/1=table:[t]\nERROR line 2: expected a key");
  EXPECT_DUMP("key 1\n", "ERROR key: expected `=` after the key");
  EXPECT_DUMP("key =\n", "ERROR key: invalid value");
  EXPECT_DUMP("key =", "ERROR key: expected a value");
  EXPECT_DUMP("key = 1 2\n", "ERROR key: expected the end of the line after the value");
  EXPECT_DUMP("key = bogus\n", "ERROR key: invalid value");
  EXPECT_DUMP("j = 0x_ff\n", "ERROR j: invalid value");  // `_` only between digits
  EXPECT_DUMP("[t]\nkey = \"\\q\"\n", "t/1=table:[t]\nERROR t.key: invalid string");
  EXPECT_DUMP("n = 9223372036854775808\n", "ERROR n: integer out of range");
  EXPECT_DUMP("[t\nx = 1\n", "ERROR t: invalid table header");
  EXPECT_DUMP("[]\n", "ERROR line 1: invalid table header");
  EXPECT_DUMP("[t] x\n", "ERROR t: expected the end of the line after the table header");
  EXPECT_DUMP("a = [1, 2\n", "ERROR a: unterminated array");
  EXPECT_DUMP("a.b.c.d.e.f.g.h.i = 1\n", "ERROR a.b.c.d.e.f.g.h: key nested too deeply");
  EXPECT_DUMP("'multi\nline' = 1\n", "ERROR line 1: expected a key");
  EXPECT_DUMP("a = 'x\ny'\n", "ERROR a: invalid string");
  EXPECT_DUMP("a = \"\\ud800\"\n", "ERROR a: invalid string");
  EXPECT_DUMP("t = { a = 1 b = 2 }\n",
              "t/0=table:{ a = 1 b = 2 }\nERROR t.a: expected `,` or `}` after the value");
  EXPECT_DUMP("t = { a = 1 } x\n",
              "t/0=table:{ a = 1 }\nERROR t.a: expected the end of the line after the value");
  EXPECT_DUMP("t = {} x\n", "t/0=table:{}\nERROR t: expected the end of the line after the value");
  EXPECT_DUMP("t = { a = 1\n", "ERROR t: unterminated table");
  EXPECT_DUMP("t = { = 1 }\n", "t/0=table:{ = 1 }\nERROR line 1: expected a key");
}

int main(void) {
  test_topic_source_and_upstream_follow_java_split();
  test_format_remote_topic_prepends_source_and_separator();
  test_internal_topic_names();
  test_is_internal_topic_follows_mm2();
  test_cycles_like_mm2();
  test_strings();
  test_config_reader();
  test_config_errors();
  if (failures) {
    fprintf(stderr, "%d of %d checks FAILED\n", failures, checks);
    return 1;
  }
  printf("all %d checks passed\n", checks);
  return 0;
}
