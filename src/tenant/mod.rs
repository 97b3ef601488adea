//! Sharing compute between tenants: who may use how much of what, and who
//! gives capacity back when its owner needs it.
//!
//! Pure model and arithmetic, no I/O and no clock:
//!
//! - [`budget`]: spend limits per period on a tenant's or a token's work.
//! - [`config`]: the `[[tenant]]` and `[[flavor]]` tables of `canopy.toml`,
//!   validated into a [`Tenancy`].
//! - [`flavor`]: which pools a flavor selects (provider/pool globs,
//!   accelerator family or model, owner).
//! - [`quota`]: admission arithmetic over nominal quotas, borrowing and
//!   lending limits within a cohort (Kueue's ClusterQueue rules), with the
//!   binding limit named in numbers when work must wait.
//! - [`doc`]: the tables as one document (canopy.toml, `PUT /v1/tenants`,
//!   the journal) and which version is in force at start.
//! - [`usage`]: what each tenant's live work uses, per flavor.
//! - [`fair`]: fair share between tenants, by usage decayed with a
//!   half-life and divided by weight.
//! - [`reclaim`]: which borrowed workloads stop when an owner needs its
//!   capacity back, and why each was chosen.
//!
//! With no tenants configured nothing here is consulted and scheduling is
//! exactly as without tenants.

pub mod budget;
pub mod config;
pub mod doc;
pub mod fair;
pub mod flavor;
pub mod quota;
pub mod reclaim;
pub mod usage;

pub use budget::{Budget, BudgetDef};
pub use config::{FlavorDef, LimitDef, OwnerDef, QuotaDef, Tenancy, TenancyError, Tenant, TenantDef};
pub use doc::TenancyDoc;
pub use flavor::{Flavor, PoolFacts};
pub use quota::{Admission, Amount, Limit, Limits, Resource, Usage, Wait, admit};
pub use reclaim::{Candidate, Choice, VictimReason};
