package gateway

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"
)

// TestMountedRoutes: routes added through Deps.Routes sit behind the same
// authentication and see the caller's key; Deps.Pages are public.
func TestMountedRoutes(t *testing.T) {
	e := newEnv(t, func(_ *Config, d *Deps) {
		d.Routes = func(v1 *echo.Group) {
			v1.GET("/ops/whoami", func(c echo.Context) error {
				k := KeyOf(c)
				return c.JSON(http.StatusOK, map[string]any{"tenant": k.Tenant, "operator": k.IsOperator()})
			})
		}
		d.Pages = func(ec *echo.Echo) {
			ec.GET("/ops", func(c echo.Context) error { return c.HTML(http.StatusOK, "<html>ops</html>") })
		}
	})
	resp, body := e.do("GET", "/v1/ops/whoami", keyA, nil)
	if resp.StatusCode != 200 || string(body) != "{\"operator\":false,\"tenant\":\"tenant-a\"}\n" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if resp, _ := e.do("GET", "/v1/ops/whoami", "", nil); resp.StatusCode != 401 {
		t.Fatalf("mounted route without a key: %d", resp.StatusCode)
	}
	if resp, body := e.do("GET", "/ops", "", nil); resp.StatusCode != 200 || string(body) != "<html>ops</html>" {
		t.Fatalf("page: %d %s", resp.StatusCode, body)
	}
	if !(Key{Tenant: OperatorTenant}).IsOperator() || (Key{Tenant: "acme"}).IsOperator() {
		t.Fatal("operator keys")
	}
}
