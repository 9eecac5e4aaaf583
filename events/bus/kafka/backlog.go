package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// Backlog reports consumer groups' lag on the brokers: for a group and its
// topics, the messages after the group's committed offset up to each
// partition's end (from the first retained offset where the group has
// committed nothing, where its readers start). It asks the brokers, so any
// process sees every group's lag, wherever the group's members run.
type Backlog struct {
	client *kafkago.Client
}

// NewBacklog returns a Backlog asking brokers.
func NewBacklog(brokers []string) (*Backlog, error) {
	if len(brokers) == 0 {
		return nil, errors.New("kafka: backlog needs brokers")
	}
	return &Backlog{client: &kafkago.Client{Addr: kafkago.TCP(brokers...)}}, nil
}

// Backlog returns the messages of topics that group has not committed. A
// topic that does not exist yet holds none. known is false when the group
// has committed nothing on any of them (no consumer has run for it, or
// none has acknowledged a message yet).
func (b *Backlog) Backlog(ctx context.Context, group string, topics []string) (n int64, known bool, err error) {
	md, err := b.client.Metadata(ctx, &kafkago.MetadataRequest{Topics: topics})
	if err != nil {
		return 0, false, fmt.Errorf("kafka: backlog of %s: metadata: %w", group, err)
	}
	parts := map[string][]int{}
	for _, t := range md.Topics {
		if t.Error != nil {
			if errors.Is(t.Error, kafkago.UnknownTopicOrPartition) {
				continue
			}
			return 0, false, fmt.Errorf("kafka: backlog of %s: topic %s: %w", group, t.Name, t.Error)
		}
		for _, p := range t.Partitions {
			parts[t.Name] = append(parts[t.Name], p.ID)
		}
	}
	if len(parts) == 0 {
		return 0, false, nil
	}
	firsts, err := b.offsets(ctx, parts, kafkago.FirstOffsetOf)
	if err != nil {
		return 0, false, fmt.Errorf("kafka: backlog of %s: first offsets: %w", group, err)
	}
	lasts, err := b.offsets(ctx, parts, kafkago.LastOffsetOf)
	if err != nil {
		return 0, false, fmt.Errorf("kafka: backlog of %s: last offsets: %w", group, err)
	}
	committed, err := b.committed(ctx, group, parts)
	if errors.Is(err, kafkago.GroupIdNotFound) {
		committed, err = &kafkago.OffsetFetchResponse{}, nil // a group nobody joined yet
	}
	if err != nil {
		return 0, false, fmt.Errorf("kafka: backlog of %s: committed offsets: %w", group, err)
	}
	at := map[topicPartition]int64{}
	for t, ps := range committed.Topics {
		for _, p := range ps {
			if p.Error != nil {
				return 0, false, fmt.Errorf("kafka: backlog of %s: %s/%d: %w", group, t, p.Partition, p.Error)
			}
			if p.CommittedOffset >= 0 {
				at[topicPartition{t, p.Partition}] = p.CommittedOffset
			}
		}
	}
	if len(at) == 0 {
		return 0, false, nil
	}
	for k, last := range lasts {
		from, ok := at[k]
		if first := firsts[k]; !ok || from < first {
			from = first // nothing committed (-1), or retention passed it
		}
		if last > from {
			n += last - from
		}
	}
	return n, true, nil
}

// committed fetches group's committed offsets. A coordinator that is not
// ready yet (a fresh broker, a group moving between brokers) is asked again
// with backoff until ctx ends.
func (b *Backlog) committed(ctx context.Context, group string, parts map[string][]int) (*kafkago.OffsetFetchResponse, error) {
	wait := 50 * time.Millisecond
	for {
		res, err := b.client.OffsetFetch(ctx, &kafkago.OffsetFetchRequest{GroupID: group, Topics: parts})
		if err == nil {
			err = res.Error
		}
		if !errors.Is(err, kafkago.NotCoordinatorForGroup) && !errors.Is(err, kafkago.GroupCoordinatorNotAvailable) && !errors.Is(err, kafkago.GroupLoadInProgress) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

type topicPartition struct {
	topic string
	part  int
}

// offsets lists one offset of every partition of parts: the first or
// the last (of). One request asks for one kind, since the response
// carries the offset without saying which was asked for.
func (b *Backlog) offsets(ctx context.Context, parts map[string][]int, of func(int) kafkago.OffsetRequest) (map[topicPartition]int64, error) {
	req := &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{}}
	for t, ps := range parts {
		for _, p := range ps {
			req.Topics[t] = append(req.Topics[t], of(p))
		}
	}
	res, err := b.client.ListOffsets(ctx, req)
	if err != nil {
		return nil, err
	}
	out := map[topicPartition]int64{}
	for t, ps := range res.Topics {
		for _, p := range ps {
			if p.Error != nil {
				return nil, fmt.Errorf("%s/%d: %w", t, p.Partition, p.Error)
			}
			// the client files the answer under FirstOffset or LastOffset
			// by the timestamp the broker returns with it; the other
			// field holds its placeholder (0 or -1)
			out[topicPartition{t, p.Partition}] = max(p.FirstOffset, p.LastOffset)
		}
	}
	return out, nil
}
