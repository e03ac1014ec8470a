// Package api is the planner's HTTP JSON API, served on net/http from a
// Backend (the planner daemon, or apitest.Backend in tests). The routes,
// described by the OpenAPI 3.0 document openapi.json (served at
// GET /v1/openapi.json and kept in step with Routes by a test):
//
//	GET    /v1/jobs            the jobs, as JobStubs
//	POST   /v1/jobs            submit {"source", "filename"} → 201 structs.Job
//	GET    /v1/jobs/{id}       one structs.Job
//	POST   /v1/jobs/{id}/stop  stop it → structs.Job
//	DELETE /v1/jobs/{id}       the same
//	POST   /v1/jobs/{id}/progress  [ProgressReport] → 204 (the training SDK)
//	GET    /v1/policies        []PolicyInfo
//	PUT    /v1/policy          {"name", "config"} → structs.PolicyState
//	GET    /v1/nodes           []NodeInfo
//	GET    /v1/queues          []structs.QueueStatus (?window=24h: with GPU-hours)
//	PUT    /v1/queues          queue blocks {"source", "filename"} → []structs.QueueStatus
//	GET    /v1/status          Status
//	GET    /v1/openapi.json    the OpenAPI document
//
// Writes (POST, PUT, DELETE) need the server's token in the
// X-Schedulearn-Token header or as "Authorization: Bearer <token>"; reads
// need the token or the read token; only the status and the OpenAPI
// document are open. A server without a token refuses every write. A
// job's progress route also takes the job's report token (ReportToken),
// which the actuator gives the job's tasks and which is good for nothing
// else. The server answers only Host headers it knows (DNS-rebinding
// protection), shows jobs Redact-ed (no env value, no webhook or artifact
// URL beyond its host), and stores a submission's Idempotency-Key with
// its job, so a retry returns the first job.
//
// Every answer that is not 2xx is JSON ErrorResponse {"error": "..."}:
// 400 bad input (a broken jobspec also carries "diagnostics", each with
// the file name, line and column), 403 no or wrong token or an unknown
// Host, 404 no such job
// or route, 405 wrong method, 409 conflict with the job's state, 413 body
// over MaxBodyBytes, 422 an idempotency key reused with another request,
// 500 backend failure, 503 planner unavailable.
package api
