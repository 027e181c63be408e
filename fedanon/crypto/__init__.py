"""The crypto layer: one small module per primitive, all at >= 128-bit security.

* `deterministic` — AES-256-SIV cell encryption (Protocols B, C).
* `keyagreement`  — X25519 + HKDF + AES-GCM key transport relayed by a helper, with public
  keys bound to the parties' TLS certificates (Protocols B, C).
* `commutative`   — commutative deterministic ciphers (Protocol A): secp256k1 (default,
  fast) and Pohlig-Hellman over MODP-3072 (slow, conservative); `GroupDictionary`.
* `paillier`      — 3072-bit Paillier with DJN randomizers, CRT decryption, per-class sums
  and class-count packing (Protocol C).
* `elgamal`       — exponential ElGamal on secp256k1, Protocol C's fast counter option.
* `parallel`      — process-pool batching used by all of the above.
* `errors`        — `CryptoError` and friends, all `FedanonError`s.

Submodules are imported explicitly (e.g. `from fedanon.crypto.paillier import ...`) so a
user of one primitive does not pay for loading the others.
"""
