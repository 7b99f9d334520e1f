package epay

import (
	"crypto/md5"
	"crypto/subtle"
	"encoding/hex"
	"net/url"
	"strings"

	"github.com/rustbill/paymentd/internal/fakes/fakekit"
)

// SigningString is the text epay v1 signs before the key is appended:
// parameter names in ascending byte order, `sign`, `sign_type` and empty
// values left out, `k=v` joined with `&`. Values are the decoded ones (what
// a PHP merchant sees in $_GET / $_POST), never re-encoded or re-formatted:
// a money of "1" is signed as "1", not "1.00".
func SigningString(params url.Values) string {
	return fakekit.SortedForm(params, "sign", "sign_type")
}

// Sign is the epay v1 MD5 signature: lowercase hex of
// MD5(SigningString(params) + key). The key is appended directly, without a
// separator.
func Sign(params url.Values, key string) string {
	sum := md5.Sum([]byte(SigningString(params) + key))
	return hex.EncodeToString(sum[:])
}

// verify reports whether params carry a valid signature for key. A
// sign_type other than MD5 (or absent) is refused: v1 knows nothing else.
func verify(params url.Values, key string) bool {
	if st := params.Get("sign_type"); st != "" && !strings.EqualFold(st, "MD5") {
		return false
	}
	got := strings.ToLower(params.Get("sign"))
	if got == "" {
		return false
	}
	want := Sign(params, key)
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
