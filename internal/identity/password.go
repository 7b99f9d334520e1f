package identity

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/crypto/argon2"
)

// Argon2id parameters (RFC 9106's second recommended option, with 64 MiB of
// memory). They are stored in every hash, so raising them later keeps old
// hashes verifiable.
const (
	argonTime    uint32 = 3
	argonMemory  uint32 = 64 * 1024
	argonThreads uint8  = 2
	argonKeyLen  uint32 = 32
	argonSaltLen        = 16
)

// argonCost is the cost part of the parameters: what new hashes spend.
type argonCost struct {
	time    uint32
	memory  uint32 // KiB
	threads uint8
}

var (
	productionCost = argonCost{time: argonTime, memory: argonMemory, threads: argonThreads}
	// testCost is what new hashes spend in a test binary (testing.Testing),
	// never in paymentd itself: the test suite registers and logs in
	// hundreds of users, and at 64 MiB and three passes each (far slower
	// under -race) that was minutes of the test command. Verification reads
	// the parameters from the hash, so it runs the same code either way;
	// the production parameters have tests of their own.
	testCost = argonCost{time: 1, memory: 64, threads: 1}
)

// newHashCost is the cost of new hashes in this binary.
func newHashCost() argonCost {
	if testing.Testing() {
		return testCost
	}
	return productionCost
}

// ErrPasswordMismatch is returned by VerifyPassword for a wrong password.
var ErrPasswordMismatch = errors.New("password does not match")

// HashPassword returns an argon2id hash in the PHC string format:
// $argon2id$v=19$m=65536,t=3,p=2$<salt>$<key>.
func HashPassword(password string) (string, error) {
	return hashPasswordAt(newHashCost(), password)
}

func hashPasswordAt(c argonCost, password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(password), salt, c.time, c.memory, c.threads, argonKeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, c.memory, c.time, c.threads, enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// VerifyPassword checks password against a hash from HashPassword in constant
// time. It returns ErrPasswordMismatch for a wrong password and another error
// for a malformed hash.
func VerifyPassword(hash, password string) error {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return errors.New("unsupported password hash format")
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return errors.New("unsupported argon2 version")
	}
	var memory, time uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &time, &threads); err != nil {
		return fmt.Errorf("malformed argon2 parameters: %w", err)
	}
	if memory == 0 || memory > 1<<22 || time == 0 || time > 64 || threads == 0 {
		return errors.New("argon2 parameters out of range")
	}
	enc := base64.RawStdEncoding
	salt, err := enc.DecodeString(parts[4])
	if err != nil {
		return fmt.Errorf("malformed salt: %w", err)
	}
	want, err := enc.DecodeString(parts[5])
	if err != nil || len(want) < 16 || len(want) > 64 {
		return errors.New("malformed key")
	}
	got := argon2.IDKey([]byte(password), salt, time, memory, threads, uint32(len(want)))
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return ErrPasswordMismatch
	}
	return nil
}
