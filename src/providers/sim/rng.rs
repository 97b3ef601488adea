//! The simulator's randomness: a SplitMix64 stream, seeded by hashing the
//! market seed with a purpose tag and a key (a token, a node name, a churn
//! step). Every decision draws from its own stream, so a fate depends only
//! on (seed, purpose, key) and never on the order of other calls.
//!
//! Owns nothing but arithmetic: no state outside the value, no clock, no OS
//! entropy.

/// A SplitMix64 generator (Steele, Lea and Flood 2014): tiny, fast and
/// statistically good enough for fault injection. Not for cryptography.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a over bytes, then mixed: a stable hash that does not change
/// between Rust versions (unlike `std`'s `DefaultHasher`).
fn hash_bytes(h: u64, bytes: &[u8]) -> u64 {
    let mut h = h ^ 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix(h)
}

impl Rng {
    /// A stream for one purpose and key under a seed.
    pub fn stream(seed: u64, purpose: &str, key: &str) -> Rng {
        let h = hash_bytes(mix(seed.wrapping_add(GOLDEN)), purpose.as_bytes());
        Rng { state: hash_bytes(h, key.as_bytes()) }
    }

    /// A stream for one purpose, key and index (a retry count, a step).
    pub fn stream_n(seed: u64, purpose: &str, key: &str, n: u64) -> Rng {
        let mut r = Rng::stream(seed, purpose, key);
        r.state = mix(r.state ^ mix(n.wrapping_add(GOLDEN)));
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix(self.state)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[lo, hi)`.
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// True with probability `p` (clamped to `[0, 1]`).
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p.clamp(0.0, 1.0)
    }

    /// Uniform integer in `[0, n)`; 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// `len` lowercase hex digits.
    pub fn hex(&mut self, len: usize) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        (0..len).map(|_| char::from(DIGITS[self.below(16) as usize])).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_independent() {
        let a: Vec<u64> = (0..4).map(|_| Rng::stream(7, "fate", "t1").next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(Rng::stream(7, "fate", "t1").next_u64(), Rng::stream(8, "fate", "t1").next_u64());
        assert_ne!(Rng::stream(7, "fate", "t1").next_u64(), Rng::stream(7, "boot", "t1").next_u64());
        assert_ne!(
            Rng::stream_n(7, "fate", "t1", 0).next_u64(),
            Rng::stream_n(7, "fate", "t1", 1).next_u64()
        );
    }

    #[test]
    fn unit_is_roughly_uniform() {
        let mut r = Rng::stream(1, "u", "");
        let n = 20_000;
        let mean: f64 = (0..n).map(|_| r.unit()).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        assert_eq!(Rng::stream(1, "h", "").hex(12).len(), 12);
    }
}
