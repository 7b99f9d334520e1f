package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// RegisterTypes teaches a connection's type map our Go types; it is the
// pool's AfterConnect.
//
// uuid.UUID is a driver.Valuer and a sql.Scanner, and pgx takes those
// paths for it by default: every UUID parameter was formatted as text,
// failed a binary encode (building an error message), was parsed back and
// encoded, and every UUID column was formatted as text and parsed by
// uuid.Scan. A payment callback has a few dozen of them; that was a tenth of
// its CPU. The codec below encodes and decodes the 16 bytes directly.
func RegisterTypes(_ context.Context, conn *pgx.Conn) error {
	conn.TypeMap().RegisterType(&pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}})
	return nil
}

// uuidCodec is pgtype.UUIDCodec that also knows uuid.UUID.
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	switch value.(type) {
	case uuid.UUID, *uuid.UUID: // a pointer is a driver.Valuer too: pgx would not dereference it
		if next := c.UUIDCodec.PlanEncode(m, oid, format, pgtype.UUID{}); next != nil {
			return uuidEncodePlan{next: next}
		}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok {
		if next := c.UUIDCodec.PlanScan(m, oid, format, (*uuidScanner)(nil)); next != nil {
			return uuidScanPlan{next: next}
		}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

type uuidEncodePlan struct{ next pgtype.EncodePlan }

func (p uuidEncodePlan) Encode(value any, buf []byte) ([]byte, error) {
	switch v := value.(type) {
	case uuid.UUID:
		return p.next.Encode(pgtype.UUID{Bytes: v, Valid: true}, buf)
	case *uuid.UUID:
		if v == nil {
			return nil, nil // NULL
		}
		return p.next.Encode(pgtype.UUID{Bytes: *v, Valid: true}, buf)
	}
	return nil, fmt.Errorf("store: cannot encode %T as uuid", value)
}

type uuidScanPlan struct{ next pgtype.ScanPlan }

func (p uuidScanPlan) Scan(src []byte, dst any) error {
	return p.next.Scan(src, (*uuidScanner)(dst.(*uuid.UUID)))
}

// uuidScanner scans into a uuid.UUID. NULL leaves uuid.Nil, as uuid.Scan
// did (a nullable column is scanned into a *uuid.UUID, which pgx sets to
// nil before it gets here).
type uuidScanner uuid.UUID

func (u *uuidScanner) ScanUUID(v pgtype.UUID) error {
	if !v.Valid {
		*u = uuidScanner(uuid.Nil)
		return nil
	}
	*u = uuidScanner(v.Bytes)
	return nil
}
