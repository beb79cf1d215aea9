// @NAME@: a refract replication policy (how topics are named on the target cluster).
//
// It starts as MirrorMaker 2's DefaultReplicationPolicy (`orders` from cluster `primary` becomes
// `primary.orders`), with its config keys `separator` and `internal_topic_separator_enabled`.
// Change formatRemoteTopic — the one place that names remote topics — and, if your names no
// longer carry the source alias, topicSource and upstreamTopic. abi.go connects these to the
// component (the policy world's canonical ABI); it needs no change.
package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

const (
	pluginName    = "@NAME@"
	pluginVersion = "0.1.0"

	defaultSeparator = "."
)

type policy struct {
	separator         string
	internalSeparator string // in internal topic names
}

// current is the policy init configured (the defaults until then).
var current = policy{separator: defaultSeparator, internalSeparator: defaultSeparator}

// initPolicy reads the config (TOML text) and, if it is valid, makes it the current policy.
func initPolicy(config string) *pluginError {
	var table map[string]any
	if _, err := toml.Decode(config, &table); err != nil {
		return invalid("TOML parse error: %s", strings.TrimPrefix(err.Error(), "toml: "))
	}
	p := policy{separator: defaultSeparator}
	internalEnabled := true
	for _, key := range slices.Sorted(maps.Keys(table)) {
		switch value := table[key]; key {
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
		// Read keys of your own here, and name them in the message below.
		default:
			return invalid("%s: unknown key; expected one of: internal_topic_separator_enabled, separator", key)
		}
	}
	p.internalSeparator = defaultSeparator
	if internalEnabled {
		p.internalSeparator = p.separator
	}
	if p.separator != defaultSeparator {
		log(levelInfo, fmt.Sprintf("using custom remote topic separator `%s`", p.separator))
		if !internalEnabled {
			log(levelWarn, fmt.Sprintf("internal topic names use `%s` instead of the separator `%s`", defaultSeparator, p.separator))
		}
	}
	current = p
	return nil
}

// CHANGE ME: the name `topic` from cluster `source` gets on the target.
func (p *policy) formatRemoteTopic(source, topic string) string {
	return source + p.separator + topic
}

// topicSource is the cluster a topic came from (none: a local topic): MirrorMaker 2's, the first
// token of Java's topic.split(Pattern.quote(separator)) if at least two tokens remain once
// trailing empty tokens are dropped, i.e. if some token after the first is not empty.
func (p *policy) topicSource(topic string) option {
	i := strings.Index(topic, p.separator)
	if i < 0 {
		return option{}
	}
	for rest := topic[i+len(p.separator):]; rest != ""; rest = rest[len(p.separator):] {
		if !strings.HasPrefix(rest, p.separator) {
			return some(topic[:i]) // rest starts with a non-empty token
		}
	}
	return option{}
}

// upstreamTopic is the topic's name one hop upstream: what follows its source and separator.
func (p *policy) upstreamTopic(topic string) option {
	source := p.topicSource(topic)
	if !source.some {
		return option{}
	}
	return some(topic[len(source.value)+len(p.separator):])
}

// isInternalTopic: MirrorMaker 2's own (`...<i>internal`), Kafka's (`__...`, `.…`) or Connect's
// (`...-internal`, `....internal`).
func (p *policy) isInternalTopic(topic string) bool {
	mm2Internal := strings.HasSuffix(topic, p.internalSeparator+"internal")
	return mm2Internal ||
		strings.HasPrefix(topic, "__") ||
		strings.HasPrefix(topic, ".") ||
		strings.HasSuffix(topic, "-internal") ||
		strings.HasSuffix(topic, ".internal")
}

func (p *policy) heartbeatsTopic() string { return "heartbeats" }

func (p *policy) offsetSyncsTopic(alias string) string {
	i := p.internalSeparator
	return "mm2-offset-syncs" + i + alias + i + "internal"
}

func (p *policy) checkpointsTopic(alias string) string {
	i := p.internalSeparator
	return alias + i + "checkpoints" + i + "internal"
}
