package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// hidden stands for the value of a config the broker marks sensitive.
const hidden = "[hidden]"

// ConfigText renders the topic's configuration as its config file shows
// it, read now: every config the broker describes for the topic (a
// sensitive value reads [hidden]), topicfs's own settings, num.partitions
// and replication.factor; name=value lines sorted by name.
func (t *Topic) ConfigText(ctx context.Context) ([]byte, error) {
	if err := t.refresh(ctx); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := map[string]string{}
	for _, bc := range t.configs {
		switch {
		case bc.sensitive:
			lines[bc.name] = hidden
		case bc.value == nil:
			lines[bc.name] = ""
		default:
			lines[bc.name] = *bc.value
		}
	}
	local, _ := t.c.defaults.apply(t.stored) // refresh checked it
	for _, name := range localNames {
		lines[name] = local.get(name)
	}
	lines["num.partitions"] = strconv.Itoa(len(t.parts))
	lines["replication.factor"] = strconv.Itoa(t.rf)
	var b bytes.Buffer
	for _, name := range slices.Sorted(maps.Keys(lines)) {
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(lines[name])
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// alterPlan is what AlterConfig changes, once every entry is valid.
type alterPlan struct {
	broker     map[string]string // broker configs ("" resets to the default)
	partitions int               // the new partition count; 0: unchanged
	stored     map[string]string // the topic's local settings; nil: unchanged
}

// AlterConfig validates every name=value of kv and then applies them all,
// or changes nothing and returns an error wrapping
// backend.ErrInvalidConfig that names each bad entry (with the broker's
// message for a broker config). topicfs's own settings are checked here and
// persisted locally; num.partitions adds partitions (never fewer);
// replication.factor cannot change (that is a partition reassignment);
// every other name is a broker config, checked by the broker
// (IncrementalAlterConfigs with validate_only) before anything is applied,
// and reset to its default by an empty value. The broker configs are
// applied first, then the partitions, then the local settings: if the
// cluster fails between those steps the error says which step.
func (t *Topic) AlterConfig(ctx context.Context, kv map[string]string) error {
	t.alterMu.Lock()
	defer t.alterMu.Unlock()
	if err := t.refresh(ctx); err != nil {
		return err
	}
	plan, err := t.plan(ctx, kv)
	if err != nil {
		return err
	}
	if len(plan.broker) > 0 {
		if err := t.alterBroker(ctx, plan.broker, false); err != nil {
			return mapErr("alter configs of "+t.name, err)
		}
	}
	if plan.partitions > 0 {
		if err := t.createPartitions(ctx, plan.partitions, false); err != nil {
			return fmt.Errorf("%w (broker configs already applied)", err)
		}
	}
	if plan.stored != nil {
		if err := t.c.saveSettings(t.name, plan.stored); err != nil {
			return err
		}
	}
	return t.refresh(ctx)
}

// plan sorts kv into its kinds and validates every entry.
func (t *Topic) plan(ctx context.Context, kv map[string]string) (alterPlan, error) {
	plan := alterPlan{broker: map[string]string{}}
	var errs []error
	t.mu.Lock()
	stored, rf, n := maps.Clone(t.stored), t.rf, len(t.parts)
	known := make(map[string]bool, len(t.configs))
	for _, bc := range t.configs {
		known[bc.name] = true
	}
	t.mu.Unlock()
	localChanged := false
	for _, name := range slices.Sorted(maps.Keys(kv)) {
		v := kv[name]
		switch {
		case isLocal(name):
			stored[name] = v
			localChanged = true
		case name == "num.partitions":
			total, err := parseRange(v, 1, maxPartitions)
			if err == nil {
				err = t.checkPartitions(int(total))
			} else {
				err = fmt.Errorf("%w: num.partitions=%q: %w", backend.ErrInvalidConfig, v, err)
			}
			if err == nil && int(total) > n {
				plan.partitions = int(total)
				err = t.createPartitions(ctx, plan.partitions, true)
			}
			errs = append(errs, err)
		case name == "replication.factor":
			errs = append(errs, checkReplicationFactor(v, rf))
		case !known[name]:
			// What the broker does not describe for the topic it does not
			// know (a broker describes every topic config it has): refused
			// here, as Kafka would, so that a typo is not stored by a
			// broker that keeps any name.
			errs = append(errs, fmt.Errorf("%w: %s: no such topic config (the broker describes none of that name)",
				backend.ErrInvalidConfig, name))
		default:
			errs = append(errs, checkKafkaValue(name, v))
			plan.broker[name] = v
		}
	}
	if localChanged {
		if _, err := t.c.defaults.apply(stored); err != nil {
			errs = append(errs, err)
		}
		plan.stored = stored
	}
	if len(plan.broker) > 0 {
		errs = append(errs, t.validateBroker(ctx, plan.broker))
	}
	if err := errors.Join(errs...); err != nil {
		return alterPlan{}, fmt.Errorf("cluster: %s: nothing changed: %w", t.name, err)
	}
	return plan, nil
}

// checkKafkaValue checks the value of a broker config the engine also
// has (retention.ms, segment.bytes, ...) against the range and form
// Kafka's own validators give, before the broker is asked: a broker that
// validates less (or a test double) must not take retention.ms=abc. Other
// names are the broker's to judge.
func checkKafkaValue(name, v string) error {
	if v == "" || !engine.IsTopicSetting(name) {
		return nil // (empty: back to the broker's default)
	}
	cfg := engine.DefaultConfig()
	if err := cfg.Set(name, v); err != nil {
		return fmt.Errorf("%w: %w", backend.ErrInvalidConfig, err)
	}
	return nil
}

// checkReplicationFactor accepts only the current replication factor.
func checkReplicationFactor(v string, rf int) error {
	n, err := parseRange(v, -1, maxInt16)
	switch {
	case err != nil:
		return fmt.Errorf("%w: replication.factor=%q: %w", backend.ErrInvalidConfig, v, err)
	case int(n) != rf:
		return fmt.Errorf("%w: replication.factor=%d: the topic has %d replicas per partition; changing that is a partition reassignment (kafka-reassign-partitions.sh), which topicfs does not do",
			backend.ErrInvalidConfig, n, rf)
	}
	return nil
}

// validateBroker asks the broker to validate the broker configs of kv. If
// it refuses several at once, each is asked alone, to name the bad ones.
func (t *Topic) validateBroker(ctx context.Context, kv map[string]string) error {
	err := t.alterBroker(ctx, kv, true)
	if err == nil || sentinelOf(err) != backend.ErrInvalidConfig {
		return mapErr("validate configs of "+t.name, err)
	}
	if len(kv) > 1 {
		var errs []error
		for _, name := range slices.Sorted(maps.Keys(kv)) {
			if e := t.alterBroker(ctx, map[string]string{name: kv[name]}, true); e != nil {
				errs = append(errs, t.refused(name, kv[name], e))
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	return t.refused(strings.Join(slices.Sorted(maps.Keys(kv)), ", "), "", err)
}

// refused is the error of a broker config the broker refused. The value
// is left out when the broker marks the config sensitive.
func (t *Topic) refused(name, value string, err error) error {
	t.mu.Lock()
	sensitive := slices.ContainsFunc(t.configs, func(bc brokerConfig) bool { return bc.name == name && bc.sensitive })
	t.mu.Unlock()
	shown := fmt.Sprintf("=%q", value)
	if sensitive || value == "" {
		shown = ""
	}
	return fmt.Errorf("%w: %s%s: the broker refused it: %w", backend.ErrInvalidConfig, name, shown, err)
}

// alterBroker sends IncrementalAlterConfigs for kv: SET, or DELETE (reset
// to the default) for an empty value.
func (t *Topic) alterBroker(ctx context.Context, kv map[string]string, validateOnly bool) error {
	ctx, cancel := t.c.reqCtx(ctx)
	defer cancel()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeTopic
	rr.ResourceName = t.name
	for _, name := range slices.Sorted(maps.Keys(kv)) {
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name = name
		if v := strings.TrimSpace(kv[name]); v == "" {
			rc.Op = kmsg.IncrementalAlterConfigOpDelete
		} else {
			rc.Op = kmsg.IncrementalAlterConfigOpSet
			rc.Value = kmsg.StringPtr(v)
		}
		rr.Configs = append(rr.Configs, rc)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, t.c.client)
	if err == nil {
		err = single(resp.Resources, func(r *kmsg.IncrementalAlterConfigsResponseResource) (int16, *string) {
			return r.ErrorCode, r.ErrorMessage
		})
	}
	return err
}
