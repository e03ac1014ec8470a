package client

import "time"

// SetRetryDelay shortens the wait between Submit's attempts in tests.
func SetRetryDelay(c *Client, d time.Duration) { c.retryDelay = d }

// HTTPTimeout is the timeout of the client's HTTP client.
func HTTPTimeout(c *Client) time.Duration { return c.http.Timeout }
