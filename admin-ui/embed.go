// Package adminui holds the admin console's production build (dist/), made by
// `task ui` from the TypeScript sources beside this file and committed, so
// that building paymentd needs no Node. internal/server serves it under
// [server].admin_path; `task check-generated` fails when dist/ is stale.
package adminui

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Dist is the built console: index.html, favicon.svg and assets/ with
// content-hashed names.
func Dist() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		// fs.Sub fails only for an invalid path; "dist" is a constant.
		panic(err)
	}
	return sub
}
