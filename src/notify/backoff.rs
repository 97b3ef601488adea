//! When a failed delivery is tried again: exponential backoff from
//! [`FIRST`] doubling to at most [`CAP`], each delay spread by up to ±20 %
//! (fixed per delivery and try, so a replay decides the same and
//! receivers that came back are not hit by every retry at once), until
//! the delivery's retry period (a day by default) has passed since it was
//! first tried.

use crate::engine::model::Millis;

/// The delay after the first failed try.
pub const FIRST: i64 = 10_000;
/// The longest delay between tries.
pub const CAP: i64 = 3_600_000;
/// How long a delivery is retried by default.
pub const PERIOD: i64 = 24 * 3_600_000;

/// When to try delivery `id` again after its `failed`-th failed try (1 for
/// the first) at `now`, the first delay being `first_delay` ms; `None`
/// when the retry period since `first` (its first try) is over: the
/// delivery is given up.
pub fn next_try(
    id: u64,
    failed: u32,
    first: Millis,
    now: Millis,
    first_delay: i64,
    period: i64,
) -> Option<Millis> {
    let exp = failed.saturating_sub(1).min(20);
    let base = first_delay.max(1).saturating_mul(1 << exp).min(CAP.max(first_delay));
    // ±20 %, from a hash of the delivery and the try (splitmix64).
    let mut z = id ^ (u64::from(failed) << 48) ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    let spread = (z % 401) as i64 - 200; // -200..=200 thousandths of 20 %
    let delay = base + base * spread / 1000;
    let at = Millis(now.0.saturating_add(delay));
    (at.0 < first.0.saturating_add(period)).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_ten_seconds_to_an_hour_and_stop_after_the_period() {
        let first = Millis(0);
        let mut now = first;
        let mut delays = Vec::new();
        let mut n = 1;
        while let Some(at) = next_try(7, n, first, now, FIRST, PERIOD) {
            delays.push(at.0 - now.0);
            now = at;
            n += 1;
        }
        // 10 s, 20 s, 40 s ... each within 20 %, then an hour at most.
        for (i, d) in delays.iter().enumerate() {
            let base = (FIRST << i.min(20)).min(CAP);
            assert!((base * 8 / 10..=base * 12 / 10).contains(d), "try {}: {d} ms against {base}", i + 1);
        }
        assert!(now.0 < PERIOD && now.0 + CAP * 12 / 10 >= PERIOD, "retried for the day: {now:?}");
        // About 9 tries up to the cap, then hourly for the rest of the day.
        assert!((25..=40).contains(&delays.len()), "{} tries", delays.len());
        // The same delivery decides the same; another is spread otherwise.
        assert_eq!(
            next_try(7, 3, first, Millis(5), FIRST, PERIOD),
            next_try(7, 3, first, Millis(5), FIRST, PERIOD)
        );
        let spread: std::collections::BTreeSet<_> =
            (0..50).map(|id| next_try(id, 3, first, first, FIRST, PERIOD)).collect();
        assert!(spread.len() > 30, "jitter spreads deliveries: {}", spread.len());
    }
}
