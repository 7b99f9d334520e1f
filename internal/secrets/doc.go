// Package secrets seals configuration secrets (a gateway's merchant key)
// for storage, with AES-256-GCM under keys from [secrets] of the
// configuration, and opens them again for the one reader that needs them
// (the plugin call).
//
// A sealed value is a string that says how it was made:
//
//	enc:v1:<key id>:<base64url, unpadded: 12-byte nonce | ciphertext | 16-byte tag>
//
// so a value stored in clear before encryption existed is told apart from
// one sealed since, and the key a value needs is named by the value itself:
// a Keyring holds the current key, which seals, and older ones, which still
// open. Every seal and open takes associated data — what the value belongs
// to (a gateway interface id and the property's path) — that is
// authenticated but not stored: a sealed value copied to another interface
// or another property does not open, and neither does one altered in any
// byte. Opening never answers anything but the exact plaintext or an error.
//
// Errors name the key id and what went wrong, never a plaintext or a key.
package secrets
