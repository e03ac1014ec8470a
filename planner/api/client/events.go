package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// EventQuery says which events GET /v1/events streams.
type EventQuery struct {
	// Job keeps one job's events; empty: all.
	Job string
	// Resume starts after index After (0: from the oldest the planner
	// holds); without it the stream starts with the events to come.
	Resume bool
	After  uint64
}

// LostError is the planner saying that events after After are no longer
// held (the client fell too far behind, or the planner restarted): the
// stream goes on from Oldest; the client should read the state afresh.
type LostError struct{ api.LostEvents }

func (e *LostError) Error() string {
	return fmt.Sprintf("events after %d were lost (the planner holds them from %d on): %s", e.After, e.Oldest, e.Message)
}

// EventStream reads the planner's server-sent events.
type EventStream struct {
	body io.ReadCloser
	rd   *bufio.Reader
	// Last is the index of the last event read, to resume from.
	Last uint64
}

// Events opens the event stream. Close it when done; cancelling ctx ends
// it too. The client's timeout does not apply to the stream.
func (c *Client) Events(ctx context.Context, q EventQuery) (*EventStream, error) {
	u := *c.base
	u.Path += "/v1/events"
	v := url.Values{}
	if q.Job != "" {
		v.Set("job", q.Job)
	}
	if q.Resume {
		v.Set("index", strconv.FormatUint(q.After, 10))
	}
	u.RawQuery = v.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("failed to build the request: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set(api.TokenHeader, c.token)
	}
	hc := *c.http
	hc.Timeout = 0 // a stream lasts; ctx ends it
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to reach the planner at %s: %w", c.base, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		e := &Error{StatusCode: resp.StatusCode, Message: strings.TrimSpace(http.StatusText(resp.StatusCode) + " " + firstLine(raw))}
		var er api.ErrorResponse
		if json.Unmarshal(raw, &er) == nil && er.Error != "" {
			e.Message = er.Error
		}
		return nil, e
	}
	return &EventStream{body: resp.Body, rd: bufio.NewReaderSize(resp.Body, 64<<10), Last: q.After}, nil
}

// Next returns the next event. A lost marker is a *LostError (the stream
// goes on: call Next again); the end of the stream is io.EOF.
func (s *EventStream) Next() (structs.StreamEvent, error) {
	for {
		typ, data, id, err := s.block()
		if err != nil {
			return structs.StreamEvent{}, err
		}
		if id != "" {
			if n, perr := strconv.ParseUint(id, 10, 64); perr == nil {
				s.Last = n
			}
		}
		switch {
		case data == "":
			continue // a comment, the retry hint, or an id-only block
		case typ == api.EventLost:
			var lost LostError
			if err := json.Unmarshal([]byte(data), &lost.LostEvents); err != nil {
				return structs.StreamEvent{}, fmt.Errorf("failed to decode the lost-events marker: %w", err)
			}
			return structs.StreamEvent{}, &lost
		}
		var e structs.StreamEvent
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return structs.StreamEvent{}, fmt.Errorf("failed to decode event %s: %w", id, err)
		}
		return e, nil
	}
}

// block reads one server-sent event block (up to a blank line).
func (s *EventStream) block() (typ, data, id string, err error) {
	var sb strings.Builder
	for {
		line, err := s.rd.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return "", "", "", fmt.Errorf("failed to read the event stream: a line over %d bytes", s.rd.Size())
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return "", "", "", io.EOF
			}
			return "", "", "", fmt.Errorf("failed to read the event stream: %w", err)
		}
		text := strings.TrimRight(string(line), "\r\n")
		if text == "" {
			return typ, sb.String(), id, nil
		}
		field, value, _ := strings.Cut(text, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			typ = value
		case "data":
			if sb.Len() > 0 {
				sb.WriteByte('\n')
			}
			sb.WriteString(value)
		case "id":
			id = value
		}
	}
}

// Close ends the stream.
func (s *EventStream) Close() error { return s.body.Close() }
