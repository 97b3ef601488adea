//! Fair share between tenants: the order in which tenants competing for
//! the same capacity are served, by their usage decayed with a half-life
//! and divided by their weights (Slurm's fair-share factor and Kueue's
//! admission fair sharing, without the hierarchy).
//!
//! ```toml
//! [fair_share]
//! half_life = "7d"    # usage this long ago counts half as much as usage now
//! ```
//!
//! With `preempt_after = "30m"` as well, borrowed work of a tenant above
//! its fair share that has run at least that long may be stopped (class
//! `reclaimed`, told why) so that a tenant below its share, in the same
//! cohort, gets capacity its order alone cannot free.
//!
//! Without `[fair_share]`, tenants' work is served first-come within
//! priority, as before. With it, the tenant whose decayed usage per unit
//! of weight is lowest is served first; priority orders work within one
//! tenant. Usage is GPU-seconds of live attempts (CPU-only work is not
//! counted: it does not compete for accelerators).
//!
//! Decay is exact for usage that is constant between two observations:
//! with `d = 2^(−Δt/h)`, `U ← U·d + r·(h/ln 2)·(1 − d)` for `r` GPUs held
//! over `Δt`. A tenant that holds `r` GPUs for ever tends to `r·h/ln 2`.
//!
//! Pure: the caller gives the time and what each tenant holds.

use crate::engine::model::Millis;
use crate::units::HumanDuration;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// `[fair_share]` as written.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FairShareDef {
    /// Usage this long ago counts half as much as usage now.
    #[schemars(with = "String")]
    pub half_life: HumanDuration,
    /// Preempt borrowed work that has run at least this long to bring a
    /// tenant below its fair share back towards it; absent: never.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub preempt_after: Option<HumanDuration>,
    /// With `preempt_after`: each pass, every tenant below its
    /// demand-aware fair share (weighted max-min of the cohort's GPUs
    /// over what each holds and waits for) gets room for its next waiting
    /// workload, from the tenants furthest above theirs, never taking a
    /// tenant below its share nor raising one above it (but for its first
    /// workload). Off: one workload of the tenant with the least decayed
    /// usage a pass.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub preempt_gaps: bool,
}

/// `[fair_share]`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FairShare {
    pub half_life: Duration,
    /// Borrowed work that has run this long may be preempted for a tenant
    /// below its fair share; `None`: never.
    #[serde(default)]
    pub preempt_after: Option<Duration>,
    /// With `preempt_after`: close every tenant's gap to its demand-aware
    /// fair share in one pass (see [`FairShareDef::preempt_gaps`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub preempt_gaps: bool,
}

impl FairShareDef {
    /// Validates the table; the error says what to write instead.
    pub fn validate(&self) -> Result<FairShare, String> {
        let h = self.half_life.0;
        if h < Duration::from_secs(60) {
            return Err(format!(
                "[fair_share] half_life = {:?} is too short; give at least \"1m\" (hours to weeks are usual)",
                self.half_life.to_string()
            ));
        }
        if self.preempt_gaps && self.preempt_after.is_none() {
            return Err("[fair_share] preempt_gaps = true needs preempt_after (e.g. \"30m\"), the least a victim has run"
                .to_string());
        }
        Ok(FairShare {
            half_life: h,
            preempt_after: self.preempt_after.map(|d| d.0),
            preempt_gaps: self.preempt_gaps,
        })
    }
}

/// GPUs one attempt held, as the journal has it: what decayed usage is
/// rebuilt from at start ([`replay`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Use {
    /// Its workload's tenant (`None`: the default tenant's).
    pub tenant: Option<String>,
    /// `provider/pool`.
    pub pool: String,
    /// All its nodes together.
    pub gpus: f64,
    /// Placed (it holds its GPUs from then) and ended (`None`: still live).
    pub from: Millis,
    pub to: Option<Millis>,
}

/// Each tenant's decayed usage at `now` from what its attempts held:
/// exactly what [`FairBook::accrue`] reaches by accruing through them,
/// `r·(h/ln 2)·(2^(−(now−end)/h) − 2^(−(now−start)/h))` for each.
/// `tenant_of` names the tenant an attempt counts for, `None` where it
/// counts for nobody (its pool is in no flavor).
pub fn replay(
    uses: &[Use],
    now: Millis,
    half_life: Duration,
    tenant_of: impl Fn(&Use) -> Option<String>,
) -> BTreeMap<String, f64> {
    let h = half_life.as_secs_f64().max(1.0);
    let k = h / std::f64::consts::LN_2;
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for u in uses {
        let Some(t) = tenant_of(u) else { continue };
        let end = u.to.unwrap_or(now).min(now);
        let start = u.from.min(end);
        let decayed = |at: Millis| (-(now.secs_since(at)) / h).exp2();
        let v = u.gpus * k * (decayed(end) - decayed(start));
        if v > 0.0 {
            *out.entry(t).or_default() += v;
        }
    }
    out
}

/// Each tenant's decayed usage, and the order they are served in.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FairBook {
    /// Decayed GPU-seconds per tenant.
    usage: BTreeMap<String, f64>,
    /// When `usage` was last brought up to date.
    at: Option<Millis>,
}

/// Where one tenant stands, as reports and reasons show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Standing {
    pub tenant: String,
    /// Its decayed usage, in GPU-hours.
    pub usage_gpu_hours: f64,
    /// Its share of all tenants' decayed usage (0 when nobody used any).
    pub share: f64,
    /// Its weight over all tenants' weights.
    pub fair_share: f64,
    /// 1 for the tenant served first.
    pub position: usize,
}

impl FairBook {
    /// Brings usage up to `now`: each tenant held `holding(tenant)` GPUs
    /// since the last call. The first call only starts the clock.
    pub fn accrue<'a>(
        &mut self,
        now: Millis,
        half_life: Duration,
        holding: impl IntoIterator<Item = (&'a str, f64)>,
    ) {
        let Some(last) = self.at.replace(now) else { return };
        let dt = now.secs_since(last);
        if dt <= 0.0 {
            self.at = Some(last.max(now));
            return;
        }
        let h = half_life.as_secs_f64().max(1.0);
        let d = (-dt / h).exp2();
        for u in self.usage.values_mut() {
            *u *= d;
        }
        let gain = h / std::f64::consts::LN_2 * (1.0 - d);
        for (t, r) in holding {
            if r > 0.0 {
                *self.usage.entry(t.to_string()).or_default() += r * gain;
            }
        }
        // Forget what has decayed to nothing.
        self.usage.retain(|_, u| *u > 1e-9);
    }

    /// A tenant's decayed usage (GPU-seconds).
    pub fn usage(&self, tenant: &str) -> f64 {
        self.usage.get(tenant).copied().unwrap_or(0.0)
    }

    /// Sets a tenant's decayed usage as of `at` (a restart restoring it).
    pub fn restore(&mut self, at: Millis, usage: impl IntoIterator<Item = (String, f64)>) {
        self.usage = usage.into_iter().filter(|(_, u)| *u > 0.0).collect();
        self.at = Some(at);
    }

    /// Every tenant's decayed usage, as stored.
    pub fn usages(&self) -> impl Iterator<Item = (&str, f64)> {
        self.usage.iter().map(|(t, u)| (t.as_str(), *u))
    }

    /// `tenants` (name, weight) in the order they are served: lowest usage
    /// per weight first; ties by the order given.
    pub fn order<'a>(&self, tenants: &[(&'a str, f64)]) -> Vec<&'a str> {
        let mut v: Vec<(f64, usize, &str)> = tenants
            .iter()
            .enumerate()
            .map(|(i, &(t, w))| (self.usage(t) / w.max(f64::MIN_POSITIVE), i, t))
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        v.into_iter().map(|(_, _, t)| t).collect()
    }

    /// Where each of `tenants` (name, weight) stands, in serving order.
    pub fn standings(&self, tenants: &[(&str, f64)]) -> Vec<Standing> {
        let total: f64 = tenants.iter().map(|(t, _)| self.usage(t)).sum();
        let weights: f64 = tenants.iter().map(|(_, w)| w).sum();
        self.order(tenants)
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                let w = tenants.iter().find(|(n, _)| *n == t).map_or(0.0, |x| x.1);
                let u = self.usage(t);
                Standing {
                    tenant: t.to_string(),
                    usage_gpu_hours: u / 3600.0,
                    share: if total > 0.0 { u / total } else { 0.0 },
                    fair_share: if weights > 0.0 { w / weights } else { 0.0 },
                    position: i + 1,
                }
            })
            .collect()
    }
}

/// Weighted max-min fair shares (water-filling) of `capacity` among
/// tenants given as (weight, demand): a tenant whose demand is at most
/// its weighted share of what is left gets its demand; what is left is
/// shared again by weight among the others, until nobody's demand is
/// below its share; they get their weighted share. A tenant of weight 0
/// gets nothing. The entitlements sum to min(capacity, Σ demand).
pub fn water_fill(capacity: f64, tenants: &[(f64, f64)]) -> Vec<f64> {
    let mut out = vec![0.0; tenants.len()];
    let mut open: Vec<usize> = (0..tenants.len()).filter(|&i| tenants[i].0 > 0.0).collect();
    let mut left = capacity.max(0.0);
    while !open.is_empty() {
        let weights: f64 = open.iter().map(|&i| tenants[i].0).sum();
        let per_weight = left / weights;
        let (sated, hungry): (Vec<usize>, Vec<usize>) =
            open.iter().partition(|&&i| tenants[i].1.max(0.0) <= tenants[i].0 * per_weight);
        if sated.is_empty() {
            for &i in &hungry {
                out[i] = tenants[i].0 * per_weight;
            }
            break;
        }
        for &i in &sated {
            out[i] = tenants[i].1.max(0.0);
            left -= out[i];
        }
        left = left.max(0.0);
        open = hungry;
    }
    out
}

/// Where `tenant` stands, as a waiting workload's reason says it:
/// "team-b is at 0.31 of its fair share 0.50; next after team-c" (or
/// "served first"). `None` when `standings` do not list it.
pub fn standing_text(standings: &[Standing], tenant: &str) -> Option<String> {
    let i = standings.iter().position(|s| s.tenant == tenant)?;
    let s = &standings[i];
    let place = match i.checked_sub(1).and_then(|j| standings.get(j)) {
        Some(ahead) => format!("next after {}", ahead.tenant),
        None => "served first".to_string(),
    };
    Some(format!("{tenant} is at {:.2} of its fair share {:.2}; {place}", s.share, s.fair_share))
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: Duration = Duration::from_secs(3600);

    #[test]
    fn usage_halves_each_half_life_and_holding_tends_to_its_ceiling() {
        let mut b = FairBook::default();
        b.accrue(Millis(0), H, [("a", 0.0)]);
        b.accrue(Millis(3_600_000), H, [("a", 2.0)]);
        // One half-life holding 2 GPUs: 2·h/ln2·(1 − ½) = h/ln2.
        let one = 3600.0 / std::f64::consts::LN_2;
        assert!((b.usage("a") - one).abs() < 1e-6, "{}", b.usage("a"));
        b.accrue(Millis(7_200_000), H, [("a", 0.0)]);
        assert!((b.usage("a") - one / 2.0).abs() < 1e-6, "halved after a half-life idle");
        for k in 3..60 {
            b.accrue(Millis(k * 3_600_000), H, [("a", 2.0)]);
        }
        assert!((b.usage("a") - 2.0 * one).abs() < 1e-3, "tends to r·h/ln2");
    }

    #[test]
    fn accrual_in_steps_equals_accrual_at_once() {
        let (mut a, mut b) = (FairBook::default(), FairBook::default());
        a.accrue(Millis(0), H, []);
        b.accrue(Millis(0), H, []);
        for k in 1..=100 {
            a.accrue(Millis(k * 36_000), H, [("t", 3.0)]);
        }
        b.accrue(Millis(3_600_000), H, [("t", 3.0)]);
        assert!((a.usage("t") - b.usage("t")).abs() < 1e-6);
    }

    #[test]
    fn replaying_the_journal_gives_what_accruing_gave() {
        let mut live = FairBook::default();
        live.accrue(Millis(0), H, []);
        // a holds 4 GPUs for 90 minutes, then b 2 GPUs from 60 to 150.
        for m in 1..=180i64 {
            let a = if m <= 90 { 4.0 } else { 0.0 };
            let b = if (61..=150).contains(&m) { 2.0 } else { 0.0 };
            live.accrue(Millis(m * 60_000), H, [("a", a), ("b", b)]);
        }
        let uses = [
            Use {
                tenant: Some("a".into()),
                pool: "p/x".into(),
                gpus: 4.0,
                from: Millis(0),
                to: Some(Millis(90 * 60_000)),
            },
            Use {
                tenant: None,
                pool: "p/x".into(),
                gpus: 2.0,
                from: Millis(60 * 60_000),
                to: Some(Millis(150 * 60_000)),
            },
            Use { tenant: Some("c".into()), pool: "p/none".into(), gpus: 8.0, from: Millis(0), to: None },
        ];
        let counted = |u: &Use| (u.pool != "p/none").then(|| u.tenant.clone().unwrap_or_else(|| "b".into()));
        let rebuilt = replay(&uses, Millis(180 * 60_000), H, counted);
        assert!((rebuilt["a"] - live.usage("a")).abs() < 1e-6, "{rebuilt:?} vs {}", live.usage("a"));
        assert!((rebuilt["b"] - live.usage("b")).abs() < 1e-6, "{rebuilt:?} vs {}", live.usage("b"));
        assert!(!rebuilt.contains_key("c"), "a pool no flavor counts counts for nobody");
    }

    #[test]
    fn the_tenant_with_least_usage_per_weight_is_served_first() {
        let mut b = FairBook::default();
        b.restore(Millis(0), [("a".to_string(), 300.0), ("b".to_string(), 200.0)]);
        assert_eq!(b.order(&[("a", 1.0), ("b", 1.0), ("c", 1.0)]), vec!["c", "b", "a"]);
        assert_eq!(b.order(&[("a", 2.0), ("b", 1.0)]), vec!["a", "b"], "150 per weight before 200");
        let s = b.standings(&[("a", 2.0), ("b", 1.0)]);
        assert_eq!((s[0].tenant.as_str(), s[0].position), ("a", 1));
        assert!((s[0].share - 0.6).abs() < 1e-9 && (s[0].fair_share - 2.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn a_standing_reads_as_a_reason() {
        let mut b = FairBook::default();
        b.restore(Millis(0), [("a".to_string(), 100.0), ("c".to_string(), 300.0)]);
        let s = b.standings(&[("a", 1.0), ("b", 1.0), ("c", 2.0)]);
        assert_eq!(
            standing_text(&s, "b").as_deref(),
            Some("b is at 0.00 of its fair share 0.25; served first")
        );
        assert_eq!(
            standing_text(&s, "a").as_deref(),
            Some("a is at 0.25 of its fair share 0.25; next after b")
        );
        assert_eq!(standing_text(&s, "nobody"), None);
    }

    #[test]
    fn gap_preemption_without_a_minimum_runtime_is_refused_with_what_to_write() {
        let def = FairShareDef { half_life: HumanDuration(H), preempt_after: None, preempt_gaps: true };
        let e = def.validate().unwrap_err();
        assert!(e.contains("preempt_gaps = true needs preempt_after"), "{e}");
        let ok = FairShareDef { preempt_after: Some(HumanDuration(H)), ..def }.validate().unwrap();
        assert!(ok.preempt_gaps && ok.preempt_after == Some(H));
    }

    #[test]
    fn a_half_life_under_a_minute_is_refused_with_what_to_write() {
        let def = FairShareDef {
            half_life: HumanDuration(Duration::from_secs(5)),
            preempt_after: None,
            preempt_gaps: false,
        };
        let e = def.validate().unwrap_err();
        assert!(e.contains("[fair_share] half_life") && e.contains("at least \"1m\""), "{e}");
    }
}
