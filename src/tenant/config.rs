//! Tenants, flavors and owners as `canopy.toml` writes them, and their
//! validation into a [`Tenancy`].
//!
//! ```toml
//! default_tenant = "platform"        # the socket owner's tenant (top of the file)
//!
//! [[flavor]]                         # a selector over pools; quotas count in flavors
//! name = "fra-h100"
//! providers = ["onprem-fra"]         # provider globs (empty: any)
//! pools = ["h100-*"]                 # pool globs (empty: any)
//! families = ["hopper"]              # accelerator families (empty: any)
//! models = ["H100*"]                 # accelerator model globs (empty: any)
//! cpu_only = false                   # true: CPU-only pools; false: accelerator pools
//! owners = ["team-a"]                # pools owned by these tenants (empty: any)
//!
//! [[tenant]]
//! name = "team-a"
//! weight = 1.0                       # fair-share weight (default 1)
//! cohort = "research"                # tenants of one cohort lend each other unused quota
//! owns = ["onprem-fra", "onprem-ams/h100-*"]   # providers, or provider/pool globs
//! max_reclaim_delay = "10m"          # borrowed work on what it owns is gone within this
//! [tenant.quota.fra-h100]
//! gpus = 16                          # nominal only, or:
//! cpu_cores = { nominal = 64, borrowing_limit = 32, lending_limit = 16 }
//! ```
//!
//! A pool belongs to the first flavor that selects it. A tenant with no
//! quota in a flavor has a nominal quota of 0 there (it may still borrow,
//! within its cohort). A resource no tenant's quota names in a flavor is
//! not counted there.

use super::flavor::{Flavor, PoolFacts, flavor_of};
use super::quota::{Limit, Limits, Resource, Usage};
use crate::units::{Glob, HumanDuration};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// The promise an owner gets when its file does not state one.
pub const DEFAULT_MAX_RECLAIM_DELAY: Duration = Duration::from_secs(15 * 60);

/// `[[flavor]]` as written.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FlavorDef {
    pub name: String,
    #[serde(default)]
    pub providers: Vec<Glob>,
    #[serde(default)]
    pub pools: Vec<Glob>,
    #[serde(default)]
    pub families: Vec<String>,
    #[serde(default)]
    pub models: Vec<Glob>,
    #[serde(default)]
    pub cpu_only: Option<bool>,
    #[serde(default)]
    pub owners: Vec<String>,
}

/// One resource's quota: a number (nominal only) or a table.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum LimitDef {
    Nominal(f64),
    Full {
        nominal: f64,
        #[serde(default)]
        borrowing_limit: Option<f64>,
        #[serde(default)]
        lending_limit: Option<f64>,
    },
}

/// `[tenant.quota.FLAVOR]` as written.
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuotaDef {
    #[serde(default)]
    pub gpus: Option<LimitDef>,
    #[serde(default)]
    pub cpu_cores: Option<LimitDef>,
}

/// `[[tenant]]` as written.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantDef {
    pub name: String,
    #[serde(default = "one")]
    pub weight: f64,
    #[serde(default)]
    pub cohort: Option<String>,
    #[serde(default)]
    pub owns: Vec<String>,
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub max_reclaim_delay: Option<HumanDuration>,
    #[serde(default)]
    pub quota: BTreeMap<String, QuotaDef>,
}

fn one() -> f64 {
    1.0
}

/// What a tenant owns: a provider, and optionally pools in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerDef {
    pub provider: Glob,
    pub pool: Glob,
}

impl OwnerDef {
    fn parse(s: &str) -> Option<Self> {
        let (provider, pool) = s.split_once('/').unwrap_or((s, "*"));
        if provider.is_empty() || pool.is_empty() || pool.contains('/') {
            return None;
        }
        Some(Self { provider: Glob::new(provider), pool: Glob::new(pool) })
    }
}

/// One tenant, validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tenant {
    pub name: String,
    pub weight: f64,
    pub cohort: Option<String>,
    pub owns: Vec<OwnerDef>,
    pub max_reclaim_delay: Duration,
    /// Per flavor name, as written (resources it names).
    pub quota: BTreeMap<String, Limits>,
}

/// Tenants, flavors and owners, validated. Empty: no tenants, and nothing
/// about scheduling changes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Tenancy {
    pub tenants: Vec<Tenant>,
    pub flavors: Vec<Flavor>,
    pub default_tenant: Option<String>,
    /// `[fair_share]`: tenants competing for capacity are served by their
    /// decayed usage per weight; `None`: first-come within priority.
    #[serde(default)]
    pub fair_share: Option<super::fair::FairShare>,
    /// `[[budget]]`: spend limits per period on tenants' and tokens' work.
    #[serde(default)]
    pub budgets: Vec<super::budget::Budget>,
}

/// A tenancy that cannot be used; says where and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TenancyError(pub String);

fn err<T>(s: String) -> Result<T, TenancyError> {
    Err(TenancyError(s))
}

fn check_name(kind: &str, name: &str) -> Result<(), TenancyError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        err(format!("{kind} name {name:?} is not valid; use 1-64 letters, digits, '-', '_' or '.'"))
    }
}

fn amount(r: Resource, x: f64, what: &str, tenant: &str, flavor: &str) -> Result<u64, TenancyError> {
    let (scale, unit) = match r {
        Resource::Gpus => (1.0, "gpus"),
        Resource::Cpu => (1000.0, "cpu_cores"),
    };
    let v = x * scale;
    if !v.is_finite() || !(0.0..=1e12).contains(&v) || (r == Resource::Gpus && x.fract() != 0.0) {
        return err(format!(
            "[[tenant]] {tenant}: quota.{flavor}.{unit} {what} {x} is not valid; give a whole, non-negative number{}",
            if r == Resource::Cpu { " of cores (fractions to 0.001)" } else { " of GPUs" }
        ));
    }
    Ok(v.round() as u64)
}

impl LimitDef {
    fn limit(&self, r: Resource, tenant: &str, flavor: &str, cohort: bool) -> Result<Limit, TenancyError> {
        let (nominal, borrowing, lending) = match *self {
            LimitDef::Nominal(n) => (n, None, None),
            LimitDef::Full { nominal, borrowing_limit, lending_limit } => {
                (nominal, borrowing_limit, lending_limit)
            }
        };
        let nominal = amount(r, nominal, "nominal", tenant, flavor)?;
        let borrowing = borrowing.map(|b| amount(r, b, "borrowing_limit", tenant, flavor)).transpose()?;
        let lending = lending.map(|l| amount(r, l, "lending_limit", tenant, flavor)).transpose()?;
        if !cohort && borrowing.is_some_and(|b| b > 0) {
            return err(format!(
                "[[tenant]] {tenant}: quota.{flavor} has a borrowing_limit but the tenant has no cohort to borrow from; \
                 set `cohort` or remove the limit"
            ));
        }
        if lending.is_some_and(|l| l > nominal) {
            return err(format!(
                "[[tenant]] {tenant}: quota.{flavor} lending_limit is above its nominal quota; \
                 a tenant lends at most what it is guaranteed"
            ));
        }
        Ok(Limit { nominal, borrowing, lending })
    }
}

impl Tenancy {
    /// Validates the file's tables.
    pub fn from_defs(
        tenants: &[TenantDef],
        flavors: &[FlavorDef],
        default_tenant: Option<&str>,
    ) -> Result<Self, TenancyError> {
        if tenants.is_empty() {
            if !flavors.is_empty() {
                return err("[[flavor]] is given but no [[tenant]]; flavors count tenants' quotas".into());
            }
            if let Some(d) = default_tenant {
                return err(format!(
                    "default_tenant = {d:?} but no [[tenant]] is defined; add it or remove the line"
                ));
            }
            return Ok(Self::default());
        }
        let mut fl: Vec<Flavor> = Vec::new();
        for f in flavors {
            check_name("flavor", &f.name)?;
            if fl.iter().any(|x| x.name == f.name) {
                return err(format!("[[flavor]] {:?} is defined twice; flavor names must be unique", f.name));
            }
            let families: Vec<String> = f.families.iter().map(|s| s.to_ascii_lowercase()).collect();
            for fam in &families {
                if !crate::accel::Family::ALL.iter().any(|k| k.as_str() == fam) {
                    let known: Vec<&str> = crate::accel::Family::ALL.iter().map(|k| k.as_str()).collect();
                    return err(format!(
                        "[[flavor]] {}: family {fam:?} is not known; use one of {}",
                        f.name,
                        known.join(", ")
                    ));
                }
            }
            fl.push(Flavor {
                name: f.name.clone(),
                providers: f.providers.clone(),
                pools: f.pools.clone(),
                families,
                models: f.models.clone(),
                cpu_only: f.cpu_only,
                owners: f.owners.clone(),
            });
        }
        let mut out: Vec<Tenant> = Vec::new();
        for t in tenants {
            check_name("tenant", &t.name)?;
            if out.iter().any(|x| x.name == t.name) {
                return err(format!("[[tenant]] {:?} is defined twice; tenant names must be unique", t.name));
            }
            if !(t.weight.is_finite() && t.weight > 0.0) {
                return err(format!("[[tenant]] {}: weight {} must be a positive number", t.name, t.weight));
            }
            if let Some(c) = &t.cohort {
                check_name("cohort", c)?;
            }
            let mut owns = Vec::new();
            for o in &t.owns {
                owns.push(OwnerDef::parse(o).ok_or_else(|| {
                    TenancyError(format!(
                        "[[tenant]] {}: owns entry {o:?} is not valid; write a provider (\"onprem-fra\") or provider/pool (\"onprem-fra/h100-*\")",
                        t.name
                    ))
                })?);
            }
            let mut quota = BTreeMap::new();
            for (flavor, q) in &t.quota {
                if !fl.iter().any(|f| &f.name == flavor) {
                    let known: Vec<&str> = fl.iter().map(|f| f.name.as_str()).collect();
                    return err(format!(
                        "[[tenant]] {}: quota names flavor {flavor:?}, which no [[flavor]] defines (defined: {})",
                        t.name,
                        if known.is_empty() { "none".to_string() } else { known.join(", ") }
                    ));
                }
                let c = t.cohort.is_some();
                let limits = Limits {
                    gpus: q.gpus.map(|l| l.limit(Resource::Gpus, &t.name, flavor, c)).transpose()?,
                    cpu: q.cpu_cores.map(|l| l.limit(Resource::Cpu, &t.name, flavor, c)).transpose()?,
                };
                quota.insert(flavor.clone(), limits);
            }
            out.push(Tenant {
                name: t.name.clone(),
                weight: t.weight,
                cohort: t.cohort.clone(),
                owns,
                max_reclaim_delay: t.max_reclaim_delay.map_or(DEFAULT_MAX_RECLAIM_DELAY, |d| d.0),
                quota,
            });
        }
        for f in &fl {
            for o in &f.owners {
                if !out.iter().any(|t| &t.name == o) {
                    return err(format!("[[flavor]] {}: owner {o:?} is not a [[tenant]]", f.name));
                }
            }
        }
        if let Some(d) = default_tenant
            && !out.iter().any(|t| t.name == d)
        {
            return err(format!("default_tenant = {d:?} is not a [[tenant]]; add it or name another"));
        }
        Ok(Self {
            tenants: out,
            flavors: fl,
            default_tenant: default_tenant.map(str::to_string),
            fair_share: None,
            budgets: Vec::new(),
        })
    }

    /// The tenancy with `[fair_share]` as written (validated).
    pub fn with_fair_share(mut self, def: Option<&super::fair::FairShareDef>) -> Result<Self, TenancyError> {
        let Some(def) = def else { return Ok(self) };
        if self.tenants.is_empty() {
            return err("[fair_share] is given but no [[tenant]]; fair share orders tenants' work".into());
        }
        self.fair_share = Some(def.validate().map_err(TenancyError)?);
        Ok(self)
    }

    /// The tenancy with `[[budget]]` as written (validated against its
    /// tenants).
    pub fn with_budgets(mut self, defs: &[super::budget::BudgetDef]) -> Result<Self, TenancyError> {
        let names: Vec<&str> = self.tenants.iter().map(|t| t.name.as_str()).collect();
        self.budgets = super::budget::validate(defs, &names)?;
        Ok(self)
    }

    /// No tenants (budgets on tokens may still be set).
    pub fn is_empty(&self) -> bool {
        self.tenants.is_empty()
    }

    pub fn tenant(&self, name: &str) -> Option<&Tenant> {
        self.tenants.iter().find(|t| t.name == name)
    }

    /// The tenant that owns a pool: the first whose `owns` matches it.
    pub fn owner_of(&self, provider: &str, pool: &str) -> Option<&Tenant> {
        self.tenants
            .iter()
            .find(|t| t.owns.iter().any(|o| o.provider.matches(provider) && o.pool.matches(pool)))
    }

    /// The flavor a pool is counted in.
    pub fn flavor_of(&self, pool: &PoolFacts<'_>) -> Option<&Flavor> {
        flavor_of(&self.flavors, pool).map(|i| &self.flavors[i])
    }

    /// `tenant`'s limits in `flavor`: as written, and for each resource
    /// another tenant counts there and this one does not name, nominal 0.
    pub fn limits(&self, tenant: &Tenant, flavor: &str) -> Limits {
        let mut l = tenant.quota.get(flavor).copied().unwrap_or_default();
        let counted = |r: Resource| {
            self.tenants.iter().any(|t| t.quota.get(flavor).is_some_and(|q| q.get(r).is_some()))
        };
        let zero = Limit { nominal: 0, borrowing: None, lending: None };
        if l.gpus.is_none() && counted(Resource::Gpus) {
            l.gpus = Some(Limit { borrowing: if tenant.cohort.is_some() { None } else { Some(0) }, ..zero });
        }
        if l.cpu.is_none() && counted(Resource::Cpu) {
            l.cpu = Some(Limit { borrowing: if tenant.cohort.is_some() { None } else { Some(0) }, ..zero });
        }
        l
    }

    /// The tenants whose quotas are shared with `tenant`'s in `flavor`: its
    /// cohort, or itself alone.
    pub fn cohort_of<'a>(&'a self, tenant: &'a Tenant) -> Vec<&'a Tenant> {
        match &tenant.cohort {
            Some(c) => self.tenants.iter().filter(|t| t.cohort.as_deref() == Some(c)).collect(),
            None => vec![tenant],
        }
    }

    /// The cohort's members with their usage in `flavor`, for
    /// [`super::quota::admit`]; `used` gives each tenant's usage there.
    pub fn members<'a>(
        &'a self,
        tenant: &'a Tenant,
        flavor: &str,
        used: impl Fn(&str) -> super::quota::Amount,
    ) -> Vec<Usage<'a>> {
        self.cohort_of(tenant)
            .into_iter()
            .map(|t| Usage { tenant: &t.name, limits: self.limits(t, flavor), used: used(&t.name) })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenant::quota::{Admission, Amount, admit};

    #[derive(Deserialize)]
    struct File {
        #[serde(default)]
        default_tenant: Option<String>,
        #[serde(default)]
        tenant: Vec<TenantDef>,
        #[serde(default)]
        flavor: Vec<FlavorDef>,
    }

    fn parse(s: &str) -> Result<Tenancy, TenancyError> {
        let f: File = toml::from_str(s).map_err(|e| TenancyError(e.to_string()))?;
        Tenancy::from_defs(&f.tenant, &f.flavor, f.default_tenant.as_deref())
    }

    const EXAMPLE: &str = r#"
default_tenant = "team-a"
[[flavor]]
name = "fra-h100"
providers = ["onprem-fra"]
families = ["Hopper"]
[[flavor]]
name = "cpu"
cpu_only = true
[[tenant]]
name = "team-a"
cohort = "research"
owns = ["onprem-fra"]
max_reclaim_delay = "10m"
[tenant.quota.fra-h100]
gpus = 16
[tenant.quota.cpu]
cpu_cores = { nominal = 64, borrowing_limit = 32, lending_limit = 16 }
[[tenant]]
name = "team-b"
cohort = "research"
weight = 2
[tenant.quota.fra-h100]
gpus = { nominal = 0, borrowing_limit = 8 }
"#;

    #[test]
    fn the_documented_example_parses_and_admits_as_the_quotas_say() {
        let t = parse(EXAMPLE).unwrap();
        assert_eq!(t.default_tenant.as_deref(), Some("team-a"));
        let a = t.tenant("team-a").unwrap();
        assert_eq!(a.max_reclaim_delay, Duration::from_secs(600));
        assert_eq!(t.owner_of("onprem-fra", "h100").map(|t| t.name.as_str()), Some("team-a"));
        assert!(t.owner_of("aws", "h100").is_none());
        let facts = PoolFacts {
            provider: "onprem-fra",
            pool: "h100",
            family: Some("hopper"),
            model: None,
            owner: None,
        };
        assert_eq!(t.flavor_of(&facts).map(|f| f.name.as_str()), Some("fra-h100"));
        // team-b names no CPU quota: nominal 0 there, borrowing from its cohort.
        let b = t.tenant("team-b").unwrap();
        assert_eq!(t.limits(b, "cpu").cpu, Some(Limit { nominal: 0, borrowing: None, lending: None }));
        assert_eq!(
            t.limits(a, "cpu").cpu,
            Some(Limit { nominal: 64_000, borrowing: Some(32_000), lending: Some(16_000) })
        );
        let m = t.members(b, "cpu", |_| Amount::ZERO);
        // team-a lends 16 of its 64 cores.
        assert_eq!(
            admit(Some("research"), "cpu", &m, "team-b", Amount::new(0, 16_000)),
            Some(Admission::Admit { borrowed: Amount::new(0, 16_000) })
        );
        assert!(matches!(
            admit(Some("research"), "cpu", &m, "team-b", Amount::new(0, 16_001)),
            Some(Admission::Wait(_))
        ));
    }

    #[test]
    fn mistakes_are_named_with_where_and_what_to_do() {
        let cases = [
            ("[[tenant]]\nname = \"a b\"", "tenant name \"a b\" is not valid"),
            ("[[tenant]]\nname = \"a\"\n[[tenant]]\nname = \"a\"", "is defined twice"),
            (
                "[[tenant]]\nname = \"a\"\n[tenant.quota.x]\ngpus = 1",
                "quota names flavor \"x\", which no [[flavor]] defines (defined: none)",
            ),
            (
                "[[flavor]]\nname = \"f\"\n[[tenant]]\nname = \"a\"\n[tenant.quota.f]\ngpus = { nominal = 1, borrowing_limit = 2 }",
                "no cohort to borrow from",
            ),
            (
                "[[flavor]]\nname = \"f\"\n[[tenant]]\nname = \"a\"\n[tenant.quota.f]\ngpus = { nominal = 1, lending_limit = 2 }",
                "lending_limit is above its nominal quota",
            ),
            (
                "[[flavor]]\nname = \"f\"\n[[tenant]]\nname = \"a\"\n[tenant.quota.f]\ngpus = 1.5",
                "quota.f.gpus nominal 1.5 is not valid",
            ),
            (
                "[[flavor]]\nname = \"f\"\nfamilies = [\"volta2\"]\n[[tenant]]\nname = \"a\"",
                "family \"volta2\" is not known",
            ),
            ("[[tenant]]\nname = \"a\"\nowns = [\"p/q/r\"]", "owns entry \"p/q/r\" is not valid"),
            (
                "default_tenant = \"z\"\n[[tenant]]\nname = \"a\"",
                "default_tenant = \"z\" is not a [[tenant]]",
            ),
            ("[[tenant]]\nname = \"a\"\nweight = 0", "weight 0 must be a positive number"),
            ("[[flavor]]\nname = \"f\"", "no [[tenant]]"),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        assert!(parse("").unwrap().is_empty());
    }
}
