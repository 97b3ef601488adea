//! Signing a delivery and checking a signature, as a receiver does:
//! HMAC-SHA256 over `"<timestamp>.<body>"`, sent as
//! `t=<timestamp>,v1=<hex>`. The timestamp is in the signed text, so a
//! captured delivery cannot be replayed later than the receiver's
//! tolerance; the comparison is constant-time.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The signature header's value for `body` sent at `timestamp` (Unix
/// seconds) under `secret`.
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    format!("t={timestamp},v1={}", hex::encode(mac(secret, timestamp, body).finalize().into_bytes()))
}

fn mac(secret: &[u8], timestamp: i64, body: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length: new_from_slice cannot fail.
    let mut m = <HmacSha256 as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!());
    m.update(timestamp.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    m
}

/// Why a signature does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("the signature header is not t=<unix seconds>,v1=<hex>: {0}")]
    Malformed(String),
    #[error("the signature was made at {at}, {age} s from now; at most {tolerance} s are accepted")]
    TooOld { at: i64, age: i64, tolerance: i64 },
    #[error("no v1 signature matches the body under the shared secret")]
    Mismatch,
}

/// Checks `header` (as [`sign`] writes it) against `body` under `secret`
/// at `now` (Unix seconds), accepting signatures made at most `tolerance`
/// seconds away. Several `v1=` values may be given (a secret being
/// rotated); one matching is enough.
pub fn verify(header: &str, secret: &[u8], body: &[u8], now: i64, tolerance: i64) -> Result<(), VerifyError> {
    let mut at = None;
    let mut sigs = Vec::new();
    for part in header.split(',') {
        let (k, v) = part.trim().split_once('=').ok_or_else(|| VerifyError::Malformed(header.into()))?;
        match k {
            "t" => at = Some(v.parse::<i64>().map_err(|_| VerifyError::Malformed(header.into()))?),
            "v1" => sigs.push(hex::decode(v).map_err(|_| VerifyError::Malformed(header.into()))?),
            _ => {}
        }
    }
    let at = at.ok_or_else(|| VerifyError::Malformed(header.into()))?;
    if sigs.is_empty() {
        return Err(VerifyError::Malformed(header.into()));
    }
    let age = now.saturating_sub(at);
    if age.saturating_abs() > tolerance {
        return Err(VerifyError::TooOld { at, age, tolerance });
    }
    if sigs.iter().any(|s| mac(secret, at, body).verify_slice(s).is_ok()) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_is_hmac_sha256_of_the_timestamp_a_dot_and_the_body() {
        // From Python's hmac module, not from this code:
        // hmac.new(b"whsec", b"1700000000.{}", hashlib.sha256).hexdigest()
        let want = "t=1700000000,v1=7d44587dddbaf4c7f70fef20f48cd594834ffea1641e3ac227b84408298738af";
        assert_eq!(sign(b"whsec", 1_700_000_000, b"{}"), want);
    }

    #[test]
    fn a_receiver_accepts_what_was_signed_and_nothing_else() {
        let body = br#"{"workload":"w-7","state":"succeeded"}"#;
        let h = sign(b"s3cret", 1_000, body);
        assert_eq!(verify(&h, b"s3cret", body, 1_010, 300), Ok(()));
        assert_eq!(verify(&h, b"other", body, 1_010, 300), Err(VerifyError::Mismatch));
        assert_eq!(verify(&h, b"s3cret", b"{}", 1_010, 300), Err(VerifyError::Mismatch));
        assert!(matches!(
            verify(&h, b"s3cret", body, 2_000, 300),
            Err(VerifyError::TooOld { age: 1_000, .. })
        ));
        // A secret being rotated: the old and the new signature both sent.
        let old = sign(b"old", 1_000, body);
        let both = format!("{h},v1={}", old.split_once("v1=").unwrap().1);
        assert_eq!(verify(&both, b"old", body, 1_000, 300), Ok(()));
        for bad in ["", "t=1", "v1=00", "t=x,v1=00", "t=1,v1=zz", "nonsense"] {
            assert!(matches!(verify(bad, b"s3cret", body, 1, 300), Err(VerifyError::Malformed(_))), "{bad}");
        }
    }
}
