//! Flavors: named selectors over pools, the units quotas are counted in.
//!
//! A pool belongs to the first flavor (in the file's order) that selects
//! it; a pool no flavor selects is not counted against any quota.

use crate::units::{Glob, allowed};
use serde::{Deserialize, Serialize};

/// What a flavor may select a pool by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoolFacts<'a> {
    pub provider: &'a str,
    pub pool: &'a str,
    /// The accelerator family's name (`"hopper"`), `None` for CPU pools.
    pub family: Option<&'a str>,
    /// The accelerator model (`"H100-SXM5-80GB"`), `None` for CPU pools.
    pub model: Option<&'a str>,
    /// The tenant that owns the pool, if any.
    pub owner: Option<&'a str>,
}

/// A named selector over pools. Every list that is not empty must match;
/// an empty list matches anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flavor {
    pub name: String,
    pub providers: Vec<Glob>,
    pub pools: Vec<Glob>,
    /// Accelerator families (lower case).
    pub families: Vec<String>,
    /// Accelerator model globs.
    pub models: Vec<Glob>,
    /// `Some(true)`: only CPU-only pools; `Some(false)`: only pools with
    /// accelerators; `None`: either.
    pub cpu_only: Option<bool>,
    /// Owning tenants; empty: whoever owns the pool, or nobody.
    pub owners: Vec<String>,
}

impl Flavor {
    pub fn selects(&self, p: &PoolFacts<'_>) -> bool {
        allowed(&self.providers, p.provider)
            && allowed(&self.pools, p.pool)
            && (self.families.is_empty() || p.family.is_some_and(|f| self.families.iter().any(|x| x == f)))
            && (self.models.is_empty() || p.model.is_some_and(|m| self.models.iter().any(|g| g.matches(m))))
            && self.cpu_only.is_none_or(|c| c == p.family.is_none())
            && (self.owners.is_empty() || p.owner.is_some_and(|o| self.owners.iter().any(|x| x == o)))
    }
}

/// The index of the first flavor selecting `pool`, if any.
pub fn flavor_of(flavors: &[Flavor], pool: &PoolFacts<'_>) -> Option<usize> {
    flavors.iter().position(|f| f.selects(pool))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flavor(name: &str) -> Flavor {
        Flavor {
            name: name.into(),
            providers: vec![],
            pools: vec![],
            families: vec![],
            models: vec![],
            cpu_only: None,
            owners: vec![],
        }
    }
    const H100: PoolFacts<'static> = PoolFacts {
        provider: "onprem-fra",
        pool: "h100-sxm",
        family: Some("hopper"),
        model: Some("H100-SXM5-80GB"),
        owner: Some("team-a"),
    };
    const CPU: PoolFacts<'static> =
        PoolFacts { provider: "onprem-fra", pool: "cpu", family: None, model: None, owner: None };

    #[test]
    fn the_first_flavor_that_selects_a_pool_counts_it() {
        let hopper = Flavor { families: vec!["hopper".into()], ..flavor("hopper") };
        let onprem = Flavor { providers: vec![Glob::new("onprem-*")], ..flavor("onprem") };
        let fs = [hopper, onprem];
        assert_eq!(flavor_of(&fs, &H100), Some(0));
        assert_eq!(flavor_of(&fs, &CPU), Some(1));
        assert_eq!(flavor_of(&fs[..1], &CPU), None);
    }

    #[test]
    fn models_owners_and_cpu_only_select() {
        let m = Flavor { models: vec![Glob::new("H100*")], ..flavor("m") };
        assert!(m.selects(&H100) && !m.selects(&CPU));
        let o = Flavor { owners: vec!["team-b".into()], ..flavor("o") };
        assert!(!o.selects(&H100) && !o.selects(&CPU));
        let c = Flavor { cpu_only: Some(true), ..flavor("c") };
        assert!(c.selects(&CPU) && !c.selects(&H100));
        let g = Flavor { cpu_only: Some(false), pools: vec![Glob::new("h100-*")], ..flavor("g") };
        assert!(g.selects(&H100) && !g.selects(&CPU));
    }
}
