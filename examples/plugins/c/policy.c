// Example refract replication policy in C: "SameName with renames".
//
// Topics keep their names on the target, except those renamed in the `[renames]` table
// (`"orders-v1" = "orders"`) and heartbeat-like topics (ending in "heartbeats"), which are named
// as MirrorMaker 2's DefaultReplicationPolicy names them: `<source><separator><topic>`. Only
// heartbeat-like topics have a source and an upstream topic; internal topics and the heartbeats,
// offset-syncs and checkpoints topic names are the default policy's.
//
// Config (all optional): separator = "." (non-empty), internal_topic_separator_enabled = true,
// and a [renames] table of strings.

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "policy_plugin.h"
#include "refract_plugin.h"

#define NAME "example-policy-c"
#define VERSION "0.1.0"
#define KEYS "internal_topic_separator_enabled, renames, separator"

typedef struct {
  refract_buf_t from, to;
} rename_t;

typedef struct {
  refract_buf_t separator;
  bool internal_topic_separator_enabled;
  rename_t *renames;
  size_t renames_len;
} settings_t;

static settings_t settings;

static void settings_free(settings_t *s) {
  refract_buf_free(&s->separator);
  for (size_t i = 0; i < s->renames_len; i++) {
    refract_buf_free(&s->renames[i].from);
    refract_buf_free(&s->renames[i].to);
  }
  free(s->renames);
  s->renames = NULL;
  s->renames_len = 0;
}

static refract_str_t separator(void) { return refract_buf_view(settings.separator); }

static refract_str_t internal_separator(void) {
  return refract_mm2_internal_separator(separator(), settings.internal_topic_separator_enabled);
}

// Reads the config into *s; returns an empty buffer, or the malloc'd error text.
static refract_buf_t read_config(refract_str_t text, settings_t *s) {
  refract_config_t c;
  refract_buf_t err = {0};
  size_t cap = 0;
  s->internal_topic_separator_enabled = true;
  refract_config_begin(&c, text);
  while (!err.ptr && refract_config_next(&c, &err) > 0) {
    refract_str_t key = c.part[0];
    if (refract_eq_cstr(key, "separator")) {
      if (c.depth > 1 || c.type != REFRACT_CONFIG_STRING)
        err = refract_config_type_error(&c, 1, "a string");
      else if (c.str.len == 0)
        err = refract_config_error(&c, 1, "must not be empty");
      else
        s->separator = refract_config_take_string(&c);
    } else if (refract_eq_cstr(key, "internal_topic_separator_enabled")) {
      if (c.depth > 1 || c.type != REFRACT_CONFIG_BOOL)
        err = refract_config_type_error(&c, 1, "a boolean");
      else
        s->internal_topic_separator_enabled = c.boolean;
    } else if (refract_eq_cstr(key, "renames")) {
      if (c.depth == 1) {  // the [renames] header (or `renames = {...}`)
        if (c.type != REFRACT_CONFIG_TABLE && c.type != REFRACT_CONFIG_INLINE_TABLE)
          err = refract_config_type_error(&c, 1, "a table");
      } else if (c.depth > 2 || c.type != REFRACT_CONFIG_STRING) {
        err = refract_config_type_error(&c, 2, "a string");
      } else if (c.str.len == 0) {
        err = refract_config_error(&c, 2, "must not be empty");
      } else {
        if (s->renames_len == cap) {
          cap = cap ? 2 * cap : 8;
          rename_t *grown = realloc(s->renames, cap * sizeof *grown);
          if (!grown) abort();
          s->renames = grown;
        }
        rename_t *r = &s->renames[s->renames_len++];
        r->from = refract_dup(c.part[1]);
        r->to = refract_config_take_string(&c);
      }
    } else {
      err = refract_config_unknown_key(&c, 1, KEYS);
    }
  }
  refract_config_end(&c);
  if (!s->separator.ptr) s->separator = refract_dup_cstr(REFRACT_MM2_DEFAULT_SEPARATOR);
  return err;
}

// ---- exports: lifecycle ------------------------------------------------------------------------

void exports_refract_plugin_lifecycle_info(exports_refract_plugin_lifecycle_plugin_info_t *ret) {
  policy_plugin_string_dup(&ret->name, NAME);
  policy_plugin_string_dup(&ret->version, VERSION);
}

bool exports_refract_plugin_lifecycle_init(policy_plugin_string_t *config,
                                           exports_refract_plugin_lifecycle_plugin_error_t *err) {
  settings_t next = {0};
  refract_buf_t message = read_config(REFRACT_VIEW(*config), &next);
  policy_plugin_string_free(config);
  if (message.ptr) {
    settings_free(&next);
    err->tag = REFRACT_PLUGIN_TYPES_PLUGIN_ERROR_INVALID_CONFIG;
    REFRACT_MOVE(err->val.invalid_config, message);
    return false;
  }
  settings_free(&settings);
  settings = next;
  char digits[20];
  policy_plugin_string_t line;
  REFRACT_MOVE(line, REFRACT_JOIN(REFRACT_LIT("keeping topic names, with "),
                                  refract_u64_str(settings.renames_len, digits),
                                  REFRACT_LIT(" rename(s); heartbeats become <source>"),
                                  separator(), REFRACT_LIT(REFRACT_MM2_HEARTBEATS_TOPIC)));
  refract_plugin_host_log(REFRACT_PLUGIN_TYPES_LOG_LEVEL_INFO, &line);
  policy_plugin_string_free(&line);
  return true;
}

// ---- exports: replication-policy ---------------------------------------------------------------

static const rename_t *find_rename(refract_str_t topic) {
  for (size_t i = 0; i < settings.renames_len; i++)
    if (refract_eq(refract_buf_view(settings.renames[i].from), topic)) return &settings.renames[i];
  return NULL;
}

static void *alloc_list(size_t n, size_t size) { return n ? refract_alloc(n * size) : NULL; }

bool exports_refract_plugin_replication_policy_format_remote_topics(
    policy_plugin_string_t *source_cluster, policy_plugin_list_string_t *topics,
    policy_plugin_list_string_t *ret,
    exports_refract_plugin_replication_policy_plugin_error_t *err) {
  (void)err;
  ret->len = topics->len;
  ret->ptr = alloc_list(topics->len, sizeof *ret->ptr);
  for (size_t i = 0; i < topics->len; i++) {
    refract_str_t topic = REFRACT_VIEW(topics->ptr[i]);
    const rename_t *r;
    if (refract_mm2_looks_like_heartbeat(topic))
      REFRACT_MOVE(ret->ptr[i], refract_mm2_format_remote_topic(REFRACT_VIEW(*source_cluster),
                                                                separator(), topic));
    else if ((r = find_rename(topic)))
      REFRACT_MOVE(ret->ptr[i], refract_dup(refract_buf_view(r->to)));
    else
      REFRACT_MOVE(ret->ptr[i], refract_dup(topic));
  }
  policy_plugin_string_free(source_cluster);
  policy_plugin_list_string_free(topics);
  return true;
}

// topic_sources and upstream_topics: the default policy's answer for heartbeat-like topics.
static void heartbeat_answers(policy_plugin_list_string_t *topics,
                              policy_plugin_list_option_string_t *ret, bool upstream) {
  ret->len = topics->len;
  ret->ptr = alloc_list(topics->len, sizeof *ret->ptr);
  for (size_t i = 0; i < topics->len; i++) {
    refract_str_t topic = REFRACT_VIEW(topics->ptr[i]), answer;
    bool some = refract_mm2_looks_like_heartbeat(topic) &&
                (upstream ? refract_mm2_upstream_topic(topic, separator(), &answer)
                          : refract_mm2_topic_source(topic, separator(), &answer));
    ret->ptr[i].is_some = some;
    if (some) REFRACT_MOVE(ret->ptr[i].val, refract_dup(answer));
  }
  policy_plugin_list_string_free(topics);
}

bool exports_refract_plugin_replication_policy_topic_sources(
    policy_plugin_list_string_t *topics, policy_plugin_list_option_string_t *ret,
    exports_refract_plugin_replication_policy_plugin_error_t *err) {
  (void)err;
  heartbeat_answers(topics, ret, false);
  return true;
}

bool exports_refract_plugin_replication_policy_upstream_topics(
    policy_plugin_list_string_t *topics, policy_plugin_list_option_string_t *ret,
    exports_refract_plugin_replication_policy_plugin_error_t *err) {
  (void)err;
  heartbeat_answers(topics, ret, true);
  return true;
}

bool exports_refract_plugin_replication_policy_is_internal_topics(
    policy_plugin_list_string_t *topics, policy_plugin_list_bool_t *ret,
    exports_refract_plugin_replication_policy_plugin_error_t *err) {
  (void)err;
  ret->len = topics->len;
  ret->ptr = alloc_list(topics->len, sizeof *ret->ptr);
  for (size_t i = 0; i < topics->len; i++)
    ret->ptr[i] =
        refract_mm2_is_internal_topic(REFRACT_VIEW(topics->ptr[i]), internal_separator());
  policy_plugin_list_string_free(topics);
  return true;
}

void exports_refract_plugin_replication_policy_heartbeats_topic(policy_plugin_string_t *ret) {
  REFRACT_MOVE(*ret, refract_mm2_heartbeats_topic());
}

void exports_refract_plugin_replication_policy_offset_syncs_topic(
    policy_plugin_string_t *cluster_alias, policy_plugin_string_t *ret) {
  REFRACT_MOVE(*ret,
                refract_mm2_offset_syncs_topic(REFRACT_VIEW(*cluster_alias), internal_separator()));
  policy_plugin_string_free(cluster_alias);
}

void exports_refract_plugin_replication_policy_checkpoints_topic(
    policy_plugin_string_t *cluster_alias, policy_plugin_string_t *ret) {
  REFRACT_MOVE(*ret,
                refract_mm2_checkpoints_topic(REFRACT_VIEW(*cluster_alias), internal_separator()));
  policy_plugin_string_free(cluster_alias);
}
