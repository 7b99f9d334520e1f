// Package secrets seals configuration secrets (a gateway's merchant key, a
// provider's API token) for storage, with AES-256-GCM under keys from
// [secrets] of the configuration, and opens them again for the one reader
// that needs them (the plugin call). config.go does it for a plugin's
// config as a whole (its "x-secret" properties), for any owner; the passes
// over every stored config are internal/secretpass.
//
// A sealed value is a string that says how it was made:
//
//	enc:v1:<key id>:<base64url, unpadded: 12-byte nonce | ciphertext | 16-byte tag>
//
// so a value stored in clear before encryption existed is told apart from
// one sealed since, and the key a value needs is named by the value itself:
// a Keyring holds the current key, which seals, and older ones, which still
// open. Every seal and open takes associated data — what the value belongs
// to (an Owner: a gateway interface, a product or an order, and the
// property's path) — that is authenticated but not stored: a sealed value
// copied to another owner or another property does not open, and neither does one altered in any
// byte. Opening never answers anything but the exact plaintext or an error.
//
// Errors name the key id and what went wrong, never a plaintext or a key.
package secrets
