package api

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the API's OpenAPI 3.0 document, written by hand. The tests
// check that it lists exactly the routes the server serves and that its
// schemas name exactly the JSON fields of the Go types they describe.
//
//go:embed openapi.json
var OpenAPI []byte

func (s *Server) openAPI(http.ResponseWriter, *http.Request) (int, any, error) {
	return http.StatusOK, OpenAPI, nil
}
