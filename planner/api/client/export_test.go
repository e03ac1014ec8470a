package client

import "time"

// SetRetryDelay shortens the wait between Submit's attempts in tests.
func SetRetryDelay(c *Client, d time.Duration) { c.retryDelay = d }
