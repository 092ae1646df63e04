// Broker-wide names: the server.properties names whose values are a Kafka
// broker's defaults for the topic settings, so that an operator can copy
// them into mount.toml (log.retention.hours=168, log.segment.bytes=...).

package engine

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// brokerName is one broker-wide name of a topic setting's default.
type brokerName struct {
	name  string // the server.properties name
	topic string // the topic setting it is the default of
	// scale converts the broker value to the topic setting's unit
	// (hours and minutes to milliseconds); 0 = taken as it is.
	scale int64
}

// brokerNames lists every broker-wide name; the names of one topic setting
// are in Kafka's precedence order (the first one given wins: ms over
// minutes over hours), as KafkaConfig resolves log.retention.* and
// log.roll.*.
var brokerNames = []brokerName{
	{name: "log.segment.bytes", topic: "segment.bytes"},
	{name: "log.roll.ms", topic: "segment.ms"},
	{name: "log.roll.hours", topic: "segment.ms", scale: 3_600_000},
	{name: "log.roll.jitter.ms", topic: "segment.jitter.ms"},
	{name: "log.roll.jitter.hours", topic: "segment.jitter.ms", scale: 3_600_000},
	{name: "log.index.size.max.bytes", topic: "segment.index.bytes"},
	{name: "log.index.interval.bytes", topic: "index.interval.bytes"},
	{name: "log.retention.ms", topic: "retention.ms"},
	{name: "log.retention.minutes", topic: "retention.ms", scale: 60_000},
	{name: "log.retention.hours", topic: "retention.ms", scale: 3_600_000},
	{name: "log.retention.bytes", topic: "retention.bytes"},
	{name: "log.retention.check.interval.ms", topic: "retention.check.interval.ms"},
	{name: "log.cleanup.policy", topic: "cleanup.policy"},
	{name: "log.cleaner.min.cleanable.ratio", topic: "min.cleanable.dirty.ratio"},
	{name: "log.cleaner.delete.retention.ms", topic: "delete.retention.ms"},
	{name: "log.cleaner.min.compaction.lag.ms", topic: "min.compaction.lag.ms"},
	{name: "log.cleaner.max.compaction.lag.ms", topic: "max.compaction.lag.ms"},
	{name: "log.segment.delete.delay.ms", topic: "file.delete.delay.ms"},
	{name: "log.flush.interval.messages", topic: "flush.messages"},
	{name: "log.flush.interval.ms", topic: "flush.ms"},
	{name: "message.max.bytes", topic: "max.message.bytes"},
	{name: "log.message.timestamp.type", topic: "message.timestamp.type"},
}

// BrokerNames returns the broker-wide names of the topic setting name, in
// Kafka's precedence order; nil when it has none (a broker uses the same
// name, as compression.type, or none).
func BrokerNames(name string) []string {
	var out []string
	for _, b := range brokerNames {
		if b.topic == name {
			out = append(out, b.name)
		}
	}
	return out
}

// IsBrokerName reports whether name is a broker-wide name of a topic
// setting (and not a topic setting's own name).
func IsBrokerName(name string) bool {
	_, ok := findBrokerName(name)
	return ok
}

// BrokerNameTopic returns the topic setting whose default the broker-wide
// name sets ("log.retention.hours" -> "retention.ms").
func BrokerNameTopic(name string) (string, bool) {
	b, ok := findBrokerName(name)
	return b.topic, ok
}

func findBrokerName(name string) (brokerName, bool) {
	for _, b := range brokerNames {
		if b.name == name {
			return b, true
		}
	}
	return brokerName{}, false
}

// FromBrokerNames returns kv (mount-wide settings, as read from mount.toml)
// with every broker-wide name replaced by its topic setting, the value
// converted to the topic setting's unit: of several names of one setting
// the first in Kafka's precedence wins (log.retention.ms over .minutes over
// .hours), and a negative log.retention.minutes or .hours means -1
// (forever), as in Kafka. A setting given both under its own name and a
// broker-wide one is an error, as is a value that does not convert or that
// the topic setting refuses; errors wrap ErrInvalidConfig and name the key
// as written. kv is not changed.
func FromBrokerNames(kv map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(kv))
	from := map[string]string{} // topic setting -> the broker name that set it
	var errs []error
	for _, b := range brokerNames {
		v, ok := kv[b.name]
		if !ok {
			continue
		}
		if _, own := kv[b.topic]; own {
			errs = append(errs, fmt.Errorf("%w: %s and %s both set %s; keep one", ErrInvalidConfig, b.topic, b.name, b.topic))
			continue
		}
		if _, done := from[b.topic]; done {
			continue // a name of higher precedence was given
		}
		from[b.topic] = b.name
		conv, err := b.convert(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q: %s", ErrInvalidConfig, b.name, v, err))
			continue
		}
		c := DefaultConfig()
		if err := c.Set(b.topic, conv); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q sets %s=%s, which %s", ErrInvalidConfig, b.name, v, b.topic, strings.TrimSpace(conv), setRule(err)))
			continue
		}
		out[b.topic] = conv
	}
	for k, v := range kv {
		if !IsBrokerName(k) {
			out[k] = v
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// convert turns a broker value into the topic setting's value.
func (b brokerName) convert(v string) (string, error) {
	if b.scale == 0 {
		return v, nil
	}
	// Kafka's log.*.hours and log.retention.minutes are INT settings.
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil {
		return "", errors.New("not an integer of 32 bits")
	}
	if n < 0 && b.topic == "retention.ms" {
		return "-1", nil // KafkaConfig: a negative retention time means forever
	}
	if n > math.MaxInt64/b.scale || n < math.MinInt64/b.scale {
		return "", errors.New("out of range")
	}
	return strconv.FormatInt(n*b.scale, 10), nil
}

// setRule is the rule an error of Config.Set states (after its
// "name=value: "), as a clause: "must be at least 1".
func setRule(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "\": "); i >= 0 {
		return msg[i+3:]
	}
	return msg
}
