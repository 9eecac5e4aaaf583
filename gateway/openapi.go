package gateway

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// OpenAPI is the OpenAPI 3.1 document of citizen's own endpoints (feedback,
// interactions, the operator surface, health), served at GET /openapi.yaml.
// OpenAI's endpoints are left to OpenAI's document. The services package's
// tests check it against the routes a running server registers.
//
//go:embed openapi.yaml
var OpenAPI []byte

// openAPI serves OpenAPI. It is not authenticated: the document describes
// the API and holds no tenant's data, and tools read it before they hold a
// key.
func openAPI(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-cache")
	return c.Blob(http.StatusOK, "application/yaml", OpenAPI)
}
