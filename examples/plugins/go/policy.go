// Command policy is an example refract replication policy written in Go: MirrorMaker 2's
// IdentityReplicationPolicy ("SameName": remote topics keep their names) with optional renames.
//
//   - format_remote_topic: a topic whose name ends in "heartbeats" gets MirrorMaker 2's default
//     name, <source><separator><topic>; any other topic gets its entry in [renames], or keeps
//     its name.
//   - topic_source, upstream_topic: the default policy's answers for heartbeat-like topics, none
//     for any other topic.
//   - is_internal_topic and the heartbeats, offset-syncs and checkpoints topic names: the
//     default policy's.
//
// Config (the plugin's config table, passed to init as TOML text):
//
//	separator = "."                          # optional, non-empty; default "."
//	internal_topic_separator_enabled = true  # optional; false: internal names use "."
//	[renames]                                # optional: source topic = target topic
//	"orders-v1" = "orders"
//
// The canonical ABI glue that connects these functions to the component is in abi.go.
package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

const (
	pluginName    = "example-policy-go"
	pluginVersion = "0.1.0"

	defaultSeparator = "."
	heartbeatsTopic  = "heartbeats"
)

type policy struct {
	separator         string
	internalSeparator string
	renames           map[string]string
}

// current is the policy init configured (the defaults until then).
var current = policy{separator: defaultSeparator, internalSeparator: defaultSeparator}

// initPolicy reads the config and, if it is valid, makes it the current policy.
func initPolicy(config string) *pluginError {
	var table map[string]any
	if _, err := toml.Decode(config, &table); err != nil {
		return invalid("TOML parse error: %s", strings.TrimPrefix(err.Error(), "toml: "))
	}
	p := policy{separator: defaultSeparator, renames: map[string]string{}}
	internalEnabled := true
	for _, key := range sortedKeys(table) {
		value := table[key]
		switch key {
		case "separator":
			s, ok := value.(string)
			if !ok {
				return invalid("%s: expected a string, found %s", key, tomlType(value))
			}
			if s == "" {
				return invalid("%s: must not be empty", key)
			}
			p.separator = s
		case "internal_topic_separator_enabled":
			b, ok := value.(bool)
			if !ok {
				return invalid("%s: expected a boolean, found %s", key, tomlType(value))
			}
			internalEnabled = b
		case "renames":
			renames, ok := value.(map[string]any)
			if !ok {
				return invalid("%s: expected a table, found %s", key, tomlType(value))
			}
			for _, from := range sortedKeys(renames) {
				to, ok := renames[from].(string)
				if !ok {
					return invalid("%s.%s: expected a string, found %s", key, from, tomlType(renames[from]))
				}
				if to == "" {
					return invalid("%s.%s: must not be empty", key, from)
				}
				p.renames[from] = to
			}
		default:
			return invalid("%s: unknown key; expected one of: internal_topic_separator_enabled, renames, separator", key)
		}
	}
	p.internalSeparator = defaultSeparator
	if internalEnabled {
		p.internalSeparator = p.separator
	}
	current = p

	if p.separator != defaultSeparator {
		log(levelInfo, fmt.Sprintf("using custom remote topic separator `%s`", p.separator))
		if !internalEnabled {
			log(levelWarn, fmt.Sprintf("internal topic names use `%s` instead of the separator `%s`", defaultSeparator, p.separator))
		}
	}
	log(levelInfo, fmt.Sprintf("topics keep their names on the target; %d rename(s)", len(p.renames)))
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func looksLikeHeartbeat(topic string) bool { return strings.HasSuffix(topic, heartbeatsTopic) }

func (p *policy) formatRemoteTopic(source, topic string) string {
	if looksLikeHeartbeat(topic) {
		return source + p.separator + topic
	}
	if to, ok := p.renames[topic]; ok {
		return to
	}
	return topic
}

// defaultTopicSource is MirrorMaker 2's topicSource: the first token of Java's
// topic.split(Pattern.quote(separator)), if at least two tokens remain once trailing empty
// tokens are dropped, i.e. if some token after the first is not empty.
func (p *policy) defaultTopicSource(topic string) (string, bool) {
	i := strings.Index(topic, p.separator)
	if i < 0 {
		return "", false
	}
	for rest := topic[i+len(p.separator):]; rest != ""; rest = rest[len(p.separator):] {
		if !strings.HasPrefix(rest, p.separator) {
			return topic[:i], true // rest starts with a non-empty token
		}
	}
	return "", false
}

func (p *policy) topicSource(topic string) option {
	if !looksLikeHeartbeat(topic) {
		return option{}
	}
	if source, ok := p.defaultTopicSource(topic); ok {
		return some(source)
	}
	return option{}
}

func (p *policy) upstreamTopic(topic string) option {
	if !looksLikeHeartbeat(topic) {
		return option{}
	}
	if source, ok := p.defaultTopicSource(topic); ok {
		return some(topic[len(source)+len(p.separator):])
	}
	return option{}
}

func (p *policy) isInternalTopic(topic string) bool {
	mm2Internal := strings.HasSuffix(topic, "internal") &&
		strings.HasSuffix(strings.TrimSuffix(topic, "internal"), p.internalSeparator)
	return mm2Internal ||
		strings.HasPrefix(topic, "__") ||
		strings.HasPrefix(topic, ".") ||
		strings.HasSuffix(topic, "-internal") ||
		strings.HasSuffix(topic, ".internal")
}

func (p *policy) heartbeatsTopic() string { return heartbeatsTopic }

func (p *policy) offsetSyncsTopic(alias string) string {
	i := p.internalSeparator
	return "mm2-offset-syncs" + i + alias + i + "internal"
}

func (p *policy) checkpointsTopic(alias string) string {
	i := p.internalSeparator
	return alias + i + "checkpoints" + i + "internal"
}
