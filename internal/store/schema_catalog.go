package store

import (
	"context"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// CatalogObject is one object of the current schema as the catalog renders
// it (sql/queries/schema_catalog.sql): Kind ("table", "column", "index", …),
// Name (a table's objects as table.object, a function with its
// arguments), Def, and Body, text to hash rather than print (a function's
// source, a view's query; "" otherwise).
type CatalogObject struct {
	Kind, Name, Def, Body string
}

// SchemaCatalog reads every object of the current schema that a migration
// can make, in no particular order.
func SchemaCatalog(ctx context.Context, db DB) ([]CatalogObject, error) {
	rows, err := dbsqlc.New(db).SchemaCatalog(ctx)
	if err != nil {
		return nil, MapError(err)
	}
	out := make([]CatalogObject, len(rows))
	for i, r := range rows {
		out[i] = CatalogObject{Kind: r.Kind, Name: r.Name, Def: r.Def, Body: r.Body}
	}
	return out, nil
}
