package payment

import (
	"encoding/hex"
	"strings"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/apperr"
)

// ReferenceLen is the length of a transfer reference: the first 8
// hexadecimal characters of the payment id, the part before its first
// dash.
const ReferenceLen = 8

// Reference is the transfer reference of a payment: what a bank-transfer
// customer is told to quote ("Quote the reference 44B14F89"), the first 8
// characters of the payment id in upper case. The bank_transfer plugin
// builds the same text from the id it is given (internal/plugintest checks
// that the two agree).
func Reference(id uuid.UUID) string {
	return strings.ToUpper(id.String()[:ReferenceLen])
}

// ReferenceRange is the range of payment ids whose reference is ref (8
// hexadecimal characters, either case): from ref followed by zeros to ref
// followed by 0xff bytes, both ends included. An id prefix as a range on
// the uuid column is what the primary key's index answers. Anything else
// is InvalidArgument.
func ReferenceRange(ref string) ([2]uuid.UUID, error) {
	var r [2]uuid.UUID
	if len(ref) != ReferenceLen {
		return r, apperr.New(apperr.InvalidArgument, "reference must be 8 hexadecimal characters")
	}
	b, err := hex.DecodeString(ref)
	if err != nil {
		return r, apperr.New(apperr.InvalidArgument, "reference must be 8 hexadecimal characters")
	}
	copy(r[0][:], b)
	copy(r[1][:], b)
	for i := len(b); i < len(r[1]); i++ {
		r[1][i] = 0xff
	}
	return r, nil
}
