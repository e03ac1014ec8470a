package api

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// IdempotencyHeader carries a submission's idempotency key: a retry of
// POST /v1/jobs with the same key and body gets the first job back, not
// a second job (the CLI sends a fresh key per `job run`).
const IdempotencyHeader = structs.IdempotencyHeader

// MaxIdempotencyKeyLen bounds an idempotency key.
const MaxIdempotencyKeyLen = 255

// idempotencyOf reads the request's idempotency key (nil when it sent
// none) and the digest of what it submits. A key is 1 to
// MaxIdempotencyKeyLen bytes of letters, digits and -_.:+/= (a UUID, a
// ULID, base64 all fit).
func idempotencyOf(r *http.Request, req SubmitRequest) (*structs.Idempotency, error) {
	vals := r.Header.Values(IdempotencyHeader)
	if len(vals) == 0 {
		return nil, nil
	}
	key := vals[0]
	switch {
	case len(vals) > 1:
		return nil, Inputf("more than one %s header", IdempotencyHeader)
	case key == "" || len(key) > MaxIdempotencyKeyLen:
		return nil, Inputf("invalid %s: 1 to %d characters", IdempotencyHeader, MaxIdempotencyKeyLen)
	case !validKey(key):
		return nil, Inputf("invalid %s: letters, digits and -_.:+/= only", IdempotencyHeader)
	}
	sum := sha256.Sum256([]byte(req.Filename + "\x00" + req.Source))
	return &structs.Idempotency{Key: key, Digest: hex.EncodeToString(sum[:])}, nil
}

func validKey(k string) bool {
	for _, c := range []byte(k) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == ':' || c == '+' || c == '/' || c == '=':
		default:
			return false
		}
	}
	return true
}
